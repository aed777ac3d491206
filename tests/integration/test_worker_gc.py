"""The worker leaves its process's start-up objects out of the collector while its
claim loop serves (gc.freeze, N2) and gives them back when it stops, so a process
that embeds a worker (a test) collects them again."""

from __future__ import annotations

import gc

import pytest

from ultimate_jobs.conf import load_settings
from ultimate_jobs.runtime.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_claim_loop_runs_frozen_and_the_worker_unfreezes_when_it_stops() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    seen: list[int] = []
    w = Worker(settings=load_settings({}), queues=["default"], concurrency=2)
    w._claim_loop = lambda: seen.append(gc.get_freeze_count())  # type: ignore[method-assign]
    assert w.run() == 0
    assert seen and seen[0] > 0  # the start-up objects were frozen while it served
    assert gc.get_freeze_count() == 0
