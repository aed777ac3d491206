"""run.atomic_step (S9): fn's writes and the checkpoint commit in one transaction on the
jobs database, fenced on the claim. The SIGKILL case is in
tests/acceptance/test_durable_processes.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction

from tests import claiming
from tests.testapp.durable_jobs import atomic_write, events, record
from tests.testapp.models import Record
from ultimate_jobs import NO_TENANT, InvalidArgument, LeaseLost, api, job
from ultimate_jobs.models import Job, JobStep
from ultimate_jobs.sql import QUERIES


@pytest.mark.django_db
def test_replay_after_success_does_not_call_fn(jobs):
    answer = atomic_write.enqueue(key="once")
    assert [str(a.outcome) for a in jobs.run()] == ["completed"]
    api.retry(answer.id)
    assert [str(a.outcome) for a in jobs.run()] == ["completed"]
    assert events("once") == ["written", "after", "after"]
    [step] = JobStep.objects.filter(job_id=answer.id)
    assert (step.kind, step.output) == ("atomic", {"written": "once"})


@pytest.mark.django_db
def test_fn_that_raises_leaves_neither_its_writes_nor_a_checkpoint(
    jobs, clean_registry
):
    @job(name="tests.half_written", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def half_written(run):
        def write():
            record(run, "half", "written")
            raise RuntimeError("after the write")

        run.atomic_step("write", write)

    half_written.enqueue()
    [attempt] = jobs.run()
    assert str(attempt.error) == "after the write"
    assert events("half") == []
    assert JobStep.objects.count() == 0


@pytest.mark.django_db
def test_fn_writing_another_database_alias_is_refused(jobs, clean_registry):
    @job(name="tests.elsewhere", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def elsewhere(run):
        run.atomic_step("write", lambda: None, using="analytics")

    elsewhere.enqueue()
    [attempt] = jobs.run()
    assert isinstance(attempt.error, InvalidArgument)
    assert attempt.error.field == "using"
    assert attempt.outcome == "dead-lettered"


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_lease_was_taken_over_cannot_commit_its_writes(
    jobs, clean_registry, second_connection
):
    """S9, W3: fn wrote; meanwhile the lease lapsed and another worker claimed the job
    (the real claim statement, on another connection). The fenced checkpoint finds the
    claim gone, so fn's writes roll back with it."""

    @job(name="tests.taken_over", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def taken_over(run):
        def write():
            record(run, "taken", "written")
            # The lease has lapsed: the staging pass makes the row ready again and
            # the other worker's claim takes it.
            assert claiming.claim_on(
                second_connection, limit=1, worker_id="other", now=jobs.travel(hours=1)
            )
            return "mine"

        return run.atomic_step("write", write)

    answer = taken_over.enqueue()
    [attempt] = jobs.run()
    assert isinstance(attempt.error, LeaseLost)
    assert attempt.landed is False  # the failure could not be written either
    assert Record.objects.filter(key="taken").count() == 0
    assert JobStep.objects.count() == 0
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.worker_id, row.attempt) == ("running", "other", 2)


@pytest.mark.django_db(transaction=True)
def test_an_open_checkpoint_holds_off_a_takeover_but_not_the_heartbeat(
    jobs, clean_registry, second_connection
):
    """S9, W3, W4: until the body's transaction commits, the recorded checkpoint keeps
    the claim (another worker's claim skips the row even with its lease lapsed) while
    this worker's heartbeat still renews it (no wait on the lock)."""
    seen = {}

    @job(name="tests.held_open", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def held_open(run):
        with transaction.atomic():
            run.atomic_step("write", lambda: record(run, "open", "written"))
            owner = Job.objects.get(pk=run.job_id).lease_owner
            second_connection.execute("SET lock_timeout = '2s'")
            seen["renewed"] = second_connection.execute(
                QUERIES["job_heartbeat"].text,
                {
                    "ids": [run.job_id],
                    "lease_owners": [owner],
                    "lease_seconds": 30.0,
                    "now": None,
                },
            ).fetchall()[0][1]
            seen["taken"] = claiming.claim_on(
                second_connection,
                limit=1,
                worker_id="other",
                now=jobs.now() + timedelta(hours=1),
            )

    held_open.enqueue()
    assert [str(a.outcome) for a in jobs.run()] == ["completed"]
    assert seen == {"renewed": True, "taken": []}
    assert events("open") == ["written"]
