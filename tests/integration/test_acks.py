"""Batched completions (N3): one statement settles many rows, each fenced on its own
claim token (W3); a worker's drain writes what is pending."""

from __future__ import annotations

import uuid

import pytest

from tests import claiming
from tests.testapp.jobs import noop, watched
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.sql.rows import Fence

pytestmark = pytest.mark.django_db(transaction=True)


def claim(db, limit):
    return claiming.claim(
        db,
        queues=["default"],
        limit=limit,
        worker_id="w",
        lease_seconds=30.0,
        names=None,
        now=None,
    )


def test_a_stale_token_in_a_batch_settles_nothing_for_its_row_and_the_rest_land():
    db = DirectDatabase("default")
    noop.enqueue_many([{"key": str(i)} for i in range(3)])
    rows = claim(db, 3)
    stale: Fence = {"id": rows[1]["id"], "lease_owner": uuid.uuid4()}
    told: dict[str, bool] = {}
    acks = Acks(db, start=False)

    def teller(key: str):
        def tell(landed: bool) -> None:
            told[key] = landed

        return tell

    for row in (rows[0], stale, rows[2]):
        assert acks.add(row, None, teller(str(row["id"])))
    acks.start()
    assert acks.close(timeout=10)
    assert acks.batches == 1  # three completions, one statement
    assert told == {
        str(rows[0]["id"]): True,
        str(rows[1]["id"]): False,
        str(rows[2]["id"]): True,
    }
    states = dict(Job.objects.values_list("id", "state"))
    assert [states[r["id"]] for r in rows] == ["done", "running", "done"]
    assert acks.add(rows[1], None) is False  # closed: the caller writes it itself
    db.close()


def test_many_completions_take_few_statements():
    db = DirectDatabase("default")
    noop.enqueue_many([{"key": str(i)} for i in range(200)])
    rows = claim(db, 200)
    acks = Acks(db, start=False)
    for row in rows:
        acks.add(row)
    acks.start()
    assert acks.close(timeout=10)
    assert acks.batches == 1
    assert Job.objects.filter(state="done").count() == 200
    db.close()


def test_a_job_someone_listens_to_is_not_batched(jobs):
    """on_settled must run after the row settled, in the attempt's thread: such a
    completion is written at once, not handed to the batch."""
    from ultimate_jobs.runtime.executor import Executor
    from ultimate_jobs.runtime.settle import Settler

    db = DirectDatabase("default")
    acks = Acks(db, start=False)  # never started: a batched completion would hang here
    executor = Executor(Settler(db), acks=acks)
    watched.enqueue(key="w")
    [row] = claim(db, 1)
    attempt = executor.execute(row)
    assert (str(attempt.outcome), attempt.landed) == ("completed", True)
    assert Job.objects.get(pk=row["id"]).state == "done"
    noop.enqueue(key="n")
    [row] = claim(db, 1)
    executor.execute(row)
    assert Job.objects.get(pk=row["id"]).state == "running"  # queued in the batch
    acks.start()
    assert acks.close(timeout=10)
    assert Job.objects.get(pk=row["id"]).state == "done"
    db.close()


def test_a_batch_of_completions_is_counted_once_per_job_name_and_logged_per_job(
    caplog, monkeypatch
):
    """N2, M1, M2: the acks report each executor's batch at once: one counter update
    with the count per queue, job name and outcome, every duration observed, a
    completion fenced out counted 'unowned' (its duration observed) with its warning
    (W3), and each landed
    job's DEBUG line still written when DEBUG is on."""
    import logging

    from prometheus_client import REGISTRY

    from ultimate_jobs.observability import metrics
    from ultimate_jobs.runtime.executor import Executor
    from ultimate_jobs.runtime.settle import Settler

    def sample(name, outcome=None):
        labels = {"queue": "default", "job": noop.name}
        if outcome is not None:
            labels["outcome"] = outcome
        return REGISTRY.get_sample_value(name, labels) or 0.0

    total, durations = "ultimate_jobs_jobs_total", "ultimate_jobs_job_duration_seconds"
    before = (
        sample(total, "completed"),
        sample(total, "unowned"),
        sample(f"{durations}_count"),
    )
    counter = metrics.materialize().outcome_series("default", noop.name, "completed")[0]
    increments: list[float] = []
    real_inc = counter.inc

    def inc(amount: float = 1) -> None:
        increments.append(amount)
        real_inc(amount)

    monkeypatch.setattr(counter, "inc", inc)
    db = DirectDatabase("default")
    acks = Acks(db, start=False)  # every completion below joins one batch
    executor = Executor(Settler(db), acks=acks)
    noop.enqueue_many([{"key": str(i)} for i in range(6)])
    rows = claim(db, 6)
    stale = {**rows[5], "lease_owner": uuid.uuid4()}  # its write is fenced out
    for row in [*rows[:5], stale]:
        attempt = executor.execute(row)
        assert (str(attempt.outcome), attempt.landed) == ("completed", True)
    caplog.set_level(logging.DEBUG, logger="ultimate_jobs.runtime.finish")
    acks.start()
    assert acks.close(timeout=10)
    assert acks.batches == 1
    assert increments == [5]
    assert (
        sample(total, "completed") - before[0],
        sample(total, "unowned") - before[1],
        sample(f"{durations}_count") - before[2],
    ) == (5, 1, 6)  # the fenced-out attempt's duration too, as before
    settled = [r for r in caplog.records if r.getMessage() == "jobs.attempt.settled"]
    assert sorted(r.job_id for r in settled) == sorted(str(r["id"]) for r in rows[:5])
    assert {(r.levelname, r.outcome) for r in settled} == {("DEBUG", "completed")}
    [unowned] = [r for r in caplog.records if r.getMessage() == "jobs.settle.unowned"]
    assert (unowned.job_id, unowned.levelname) == (str(rows[5]["id"]), "WARNING")
    db.close()
