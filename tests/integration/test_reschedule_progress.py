"""run.reschedule (S5) and run.progress (S7) through the real SQL and the test clock."""

from __future__ import annotations

import pytest

from tests.testapp.durable_jobs import counting, events, recover_cart
from ultimate_jobs import NO_TENANT, InvalidArgument, InvalidJobPayload, api, job
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def outcomes(jobs):
    return [str(a.outcome) for a in jobs.run()]


def test_reschedule_runs_a_three_stage_sequence_with_a_fresh_budget_per_stage(jobs):
    """S5: one row carries remind -> again -> abandon; each stage fails once after
    calling reschedule (so it retries on its OLD input) and still has its second
    attempt, because every stage starts at attempt 0 (Retry(attempts=2))."""
    answer = recover_cart.enqueue(key="cart", flaky=True)
    original = Job.objects.get(pk=answer.id)
    assert outcomes(jobs) == ["retried"]
    assert Job.objects.get(pk=answer.id).input["key"] == "cart"
    assert "stage" not in Job.objects.get(pk=answer.id).input  # the old input kept
    jobs.travel(seconds=1)
    assert outcomes(jobs) == ["rescheduled"]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.input["stage"]) == ("delayed", 0, "again")
    assert (job.id, job.run_id, job.idempotency_key) == (
        original.id,
        original.run_id,
        original.idempotency_key,
    )
    assert outcomes(jobs) == []  # due in an hour
    jobs.travel(hours=1)
    assert outcomes(jobs) == ["retried"]
    jobs.travel(seconds=1)
    assert outcomes(jobs) == ["rescheduled"]
    jobs.travel(days=1)
    assert outcomes(jobs) == ["retried"]
    jobs.travel(seconds=1)
    assert outcomes(jobs) == ["completed"]
    assert events("cart") == [
        "remind:1",
        "remind:2",
        "again:1",
        "again:2",
        "abandon:1",
        "abandon:2",
    ]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.input["stage"]) == ("done", 2, "abandon")
    # Every stage ran its own "look" step: earlier stages' steps are archived.
    looks = JobStep.objects.filter(job_id=answer.id, name="look")
    assert [(s.output, s.archived) for s in looks] == [
        ("remind", True),
        ("again", True),
        ("abandon", False),
    ]
    assert [s["name"] for s in api.get(answer.id)["steps"]] == ["look"]


def test_reschedule_is_checked_when_called(jobs, clean_registry):
    @job(name="tests.bad_stage", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def bad_stage(run, n: int = 0):
        run.reschedule(delay="1m", input={"n": "not a number"})

    @job(name="tests.bad_delay", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def bad_delay(run):
        run.reschedule(delay="soon")

    first = bad_stage.enqueue()
    second = bad_delay.enqueue()
    attempts = {a.job_id: a for a in jobs.run()}
    assert isinstance(attempts[first.id].error, InvalidJobPayload)
    assert isinstance(attempts[second.id].error, InvalidArgument)
    assert Job.objects.get(pk=first.id).input == {}


def test_progress_is_written_at_most_once_a_second_and_last_at_the_settle(jobs):
    """S7: the body reads its own row back after each report: within one second only
    the first report was written; the settle writes the last one."""
    answer = counting.enqueue(key="p", n=50)
    assert outcomes(jobs) == ["completed"]
    assert events("p") == ["seen:1"] * 50
    assert Job.objects.get(pk=answer.id).progress == {
        "done": 50,
        "total": 50,
        "note": "item 50",
    }
    assert api.get(answer.id)["progress"]["done"] == 50


def test_progress_refuses_bad_values(jobs, clean_registry):
    @job(name="tests.bad_progress", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def bad_progress(run):
        run.progress(-1, 10)

    bad_progress.enqueue()
    [attempt] = jobs.run()
    assert isinstance(attempt.error, InvalidArgument)
    assert attempt.error.field == "done"
