"""The worker and the testing runner share one claimer: stage → plain → limited →
admit (W2, W5, L1-L3, X1), on real PostgreSQL sessions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.testapp.jobs import capped, noop
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DirectDatabase, DjangoDatabase
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.sql import Query

CLAIMING = {"job_stage", "job_claim_plain", "job_claim"}


class Noting:
    """Runs every statement for real and notes the claiming ones, in order."""

    names: list[str]

    def note(self, query: Query[Any]) -> None:
        if query.name in CLAIMING:
            self.names.append(query.name)


class NotingDirect(Noting, DirectDatabase):
    def __init__(self, alias: str) -> None:
        DirectDatabase.__init__(self, alias)
        self.names = []

    def run(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.note(query)
        return DirectDatabase.run(self, query, **params)

    def hot(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.note(query)  # the worker claims through the hot door (db.py)
        return DirectDatabase.hot(self, query, **params)


class NotingDjango(Noting, DjangoDatabase):
    def __init__(self, alias: str) -> None:
        DjangoDatabase.__init__(self, alias)
        self.names = []

    def run(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.note(query)
        return DjangoDatabase.run(self, query, **params)

    def hot(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.note(query)  # the app's connection has the hot door too (db.py)
        return DjangoDatabase.hot(self, query, **params)


@pytest.mark.django_db(transaction=True)
def test_an_uncapped_job_is_claimed_by_the_plain_claim_in_a_worker_and_in_tests(jobs):
    """X1: the job a worker claims with job_claim_plain (after the staging pass) is
    claimed the same way under ultimate_jobs.testing, not by the limited claim."""
    worker = Worker(settings=load_settings({}), queues=["default"], concurrency=1)
    noted = NotingDirect("default")
    worker.claimer.db = noted  # the worker's own claimer, on a noting connection
    try:
        first = noop.enqueue(key="in-a-worker")
        assert worker.run_once() == 1  # no pool runs: the row stays held
        assert noted.names == ["job_stage", "job_claim_plain"]
        assert worker.ledger.ids() == [first.id]
        assert worker.run_once() is None  # its one slot is held: no statement
        assert noted.names == ["job_stage", "job_claim_plain"]
        [held] = worker.ledger.rows()
        assert Settler(DjangoDatabase("default")).complete(held) is True
    finally:
        noted.close()

    jobs.db = runner = NotingDjango("default")
    second = noop.enqueue(key="in-a-test")
    [attempt] = jobs.run()
    assert (attempt.job_id, str(attempt.outcome)) == (second.id, "completed")
    # Claimed by the plain claim after a staging pass; then a round that finds
    # nothing tries the limited claim too (any name, as the runner serves) and stops.
    assert runner.names == [
        "job_stage",
        "job_claim_plain",
        "job_stage",
        "job_claim_plain",
        "job_claim",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_capped_job_is_claimed_by_the_limited_claim_in_tests(jobs):
    """L1, X1: a job with a fleet cap goes through job_claim, as in a worker."""
    jobs.db = runner = NotingDjango("default")
    answer = capped.enqueue(key="capped", seconds=0)
    [attempt] = jobs.run(until_idle=False)
    assert (attempt.job_id, str(attempt.outcome)) == (answer.id, "completed")
    assert runner.names == ["job_stage", "job_claim_plain", "job_claim"]
    assert Job.objects.get(pk=answer.id).state == "done"


@pytest.mark.django_db(transaction=True)
def test_a_wake_claims_in_one_hop_and_stages_only_when_the_claim_finds_nothing(jobs):
    """N2: a notification's round is the claim alone; a wake for a row not ready yet
    (here a delayed one) stages after an empty claim and claims again."""
    worker = Worker(settings=load_settings({}), queues=["default"], concurrency=4)
    noted = NotingDirect("default")
    worker.claimer.db = noted
    try:
        assert worker.run_once() == 0  # the first round stages (nothing due yet)
        noted.names.clear()
        first = noop.enqueue(key="woken")
        worker._on_notification("default")
        assert worker.run_once() == 1
        claims = ["job_claim_plain", "job_claim"]  # the testapp declares capped jobs
        assert noted.names == claims  # no staging pass first
        noted.names.clear()
        later = noop.enqueue(key="later")
        Job.objects.filter(id=later.id).update(state="delayed")
        worker._on_notification("default")
        assert worker.run_once() == 1  # staging made the delayed (due) row ready
        assert noted.names == [*claims, "job_stage", *claims]
        assert sorted(worker.ledger.ids()) == sorted([first.id, later.id])
    finally:
        noted.close()
