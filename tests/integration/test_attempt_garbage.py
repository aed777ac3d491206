"""An attempt's objects (its Run, the Ending, the token, the lazy secrets and log
buffer) are freed when the last reference goes, not by the cyclic collector (N2): a
reference cycle per job made the collector run about once per 40 jobs in a drain."""

from __future__ import annotations

import gc

import pytest

from tests import claiming
from tests.testapp.jobs import noop
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.attempt import Ending
from ultimate_jobs.runtime.executor import Executor
from ultimate_jobs.runtime.settle import Settler

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = 20


def test_a_completed_attempt_leaves_no_cyclic_garbage():
    db = DirectDatabase("default")
    acks = Acks(db, start=False)  # completions queue up; written below
    executor = Executor(Settler(db), acks=acks)
    noop.enqueue_many([{"key": str(i)} for i in range(JOBS)])
    rows = claiming.claim(
        db, queues=["default"], limit=JOBS, worker_id="w", lease_seconds=30.0,
        names=None, now=None,
    )  # fmt: skip
    assert len(rows) == JOBS
    executor.execute(rows[0])  # caches filled on first use are not garbage
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for row in rows[1:]:
            attempt = executor.execute(row)
            assert str(attempt.outcome) == "completed"
        del attempt
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, Run | Ending)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []
    acks.start()
    assert acks.close(timeout=10)
    db.close()
