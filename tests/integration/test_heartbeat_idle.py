"""An idle worker's registry row is rewritten only as often as its expiry needs (W8,
N2, issue 26): every other beat by default, never within a third of the lease of
lapsing."""

from __future__ import annotations

import pytest

from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Worker
from ultimate_jobs.runtime.heartbeat import Beat
from ultimate_jobs.runtime.held import Ledger
from ultimate_jobs.runtime.lifecycle import Lifecycle

pytestmark = pytest.mark.django_db

DB = DjangoDatabase("default")
LEASE = 30.0


def idle_beat() -> Beat:
    return Beat(
        Ledger(),
        worker_id="idle-1",
        queues=["default"],
        slots=4,
        lease=LEASE,
        every=LEASE / 3,
        lifecycle=Lifecycle(),
    )


def test_an_idle_beat_writes_the_row_every_other_beat_before_it_could_lapse():
    beat = idle_beat()
    beat.run_once(DB)  # type: ignore[arg-type]
    assert list(Worker.objects.values_list("id", flat=True)) == ["idle-1"]
    Worker.objects.all().delete()

    beat.run_once(DB)  # type: ignore[arg-type]  # just written
    assert not Worker.objects.exists()

    assert beat._registered_at is not None
    beat._registered_at -= LEASE / 3  # a beat later: the next would find it 20 s old
    beat.run_once(DB)  # type: ignore[arg-type]
    assert not Worker.objects.exists()

    beat._registered_at -= LEASE / 3  # two beats: the next would find it lapsed
    beat.run_once(DB)  # type: ignore[arg-type]
    assert list(Worker.objects.values_list("id", flat=True)) == ["idle-1"]


def test_a_changed_list_is_written_at_the_next_beat_whatever_its_age():
    beat = idle_beat()
    beat.run_once(DB)  # type: ignore[arg-type]
    Worker.objects.all().delete()
    beat._registered = (("a job that has since finished",), ())
    beat.run_once(DB)  # type: ignore[arg-type]
    [row] = Worker.objects.all()
    assert (row.id, row.in_flight, row.abandoned) == ("idle-1", [], 0)
