"""An idle worker's registry row rides its poll's staging pass (W8, N2, issue 26):
over an idle minute the worker sends its polls and nothing else, the row never gets
older than two thirds of the lease, and the refresh still hears a drain request."""

from __future__ import annotations

import types
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.claiming import Counting
from ultimate_jobs.conf import load_settings
from ultimate_jobs.models import Worker as WorkerRow
from ultimate_jobs.runtime import claimer as claimer_module
from ultimate_jobs.runtime import heartbeat as heartbeat_module
from ultimate_jobs.runtime.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def idle(monkeypatch):
    """A worker whose wake is proven, on counting connections, on a fake clock."""
    clock = [1000.0]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0])
    monkeypatch.setattr(heartbeat_module, "time", fake)
    monkeypatch.setattr(claimer_module, "time", fake)
    settings = load_settings({})
    worker = Worker(settings=settings, queues=["default"], concurrency=4)
    worker.idle_ceiling = lambda: settings.WOKEN_IDLE_POLL_MAX  # type: ignore[method-assign]
    sent: list[str] = []
    poll_db, beat_db = Counting("default", sent), Counting("default", sent)
    worker.claimer.db = poll_db
    worker.heartbeat.run_once(beat_db)  # the row's first write
    worker.run_once()
    sent.clear()
    yield types.SimpleNamespace(
        worker=worker, clock=clock, sent=sent, beat_db=beat_db, settings=settings
    )
    poll_db.close()
    beat_db.close()


def test_an_idle_minute_sends_only_its_polls_and_keeps_the_row_fresh(idle):
    """Polls at the woken ceiling (5 s) and beats every third of the lease, out of
    step: 12 statements a minute, all staging passes; before issue 26 the beat added
    its own worker_beat every other beat (15)."""
    worker, settings = idle.worker, idle.settings
    beat = worker.heartbeat
    first = WorkerRow.objects.get().heartbeat_at
    poll, every = settings.WOKEN_IDLE_POLL_MAX, settings.heartbeat_seconds
    ticks = 4  # quarter seconds
    oldest = 0.0
    start = idle.clock[0]
    for tick in range(1, 60 * ticks + 1):
        idle.clock[0] = start + tick / ticks
        if tick % int(poll * ticks) == 0:
            assert worker.run_once() == 0
        if (tick - 13) % int(every * ticks) == 0:  # the beat, out of step with polls
            beat.run_once(idle.beat_db)
        assert beat._registered_at is not None
        oldest = max(oldest, idle.clock[0] - beat._registered_at)
    assert Counter(idle.sent) == {"job_stage": 12}
    assert oldest <= settings.LEASE * 2 / 3
    row = WorkerRow.objects.get()
    assert row.heartbeat_at > first
    assert row.expires_at - row.heartbeat_at == timedelta(seconds=settings.LEASE)


def test_a_drain_request_reaches_an_idle_worker_with_the_refresh(idle):
    worker = idle.worker
    WorkerRow.objects.update(drain_requested_at=timezone.now())
    idle.clock[0] += idle.settings.LEASE / 3  # the refresh is due at this poll
    assert worker.run_once() == 0
    assert idle.sent == ["job_stage"]
    assert worker.lifecycle.stopping.is_set()


def test_a_row_the_refresh_did_not_find_is_written_whole_by_the_next_beat(idle):
    worker = idle.worker
    WorkerRow.objects.all().delete()  # expired and deleted by another worker
    idle.clock[0] += idle.settings.LEASE / 3
    assert worker.run_once() == 0
    assert not WorkerRow.objects.exists()
    assert worker.heartbeat.now.is_set()  # the beat runs at once
    worker.heartbeat.run_once(idle.beat_db)
    assert idle.sent == ["job_stage", "worker_beat"]
    assert WorkerRow.objects.get().id == worker.worker_id


def test_a_busy_worker_never_carries_the_row(idle):
    worker = idle.worker
    worker.heartbeat._registered = (("a held job",), ())
    idle.clock[0] += idle.settings.LEASE
    assert worker.heartbeat.carry(idle.settings.WOKEN_IDLE_POLL_MAX) is None
