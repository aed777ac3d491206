"""Durable steps and sleeps through the real SQL, driven by the testing runner and its
clock (S1-S3, S8, P2 retry from_step, P3 steps in the JSON)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.testapp.durable_jobs import (
    async_steps,
    events,
    fan_child,
    fan_out,
    onboard,
    swallower,
)
from ultimate_jobs import (
    NO_TENANT,
    InvalidArgument,
    JobAborted,
    StepDuplicate,
    api,
    job,
)
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def state(job_id):
    return Job.objects.values_list("state", "attempt").get(pk=job_id)


def steps(job_id):
    return list(
        JobStep.objects.filter(job_id=job_id, archived=False).values_list(
            "name", "kind", "status"
        )
    )


def test_the_seed_onboarding_example_replays_steps_and_sleeps_three_days(jobs):
    """S1, S3, W9: step 2 fails on attempt 1; attempt 2 answers step 1 from storage
    without calling it and runs step 2; the 3-day sleep suspends without spending an
    attempt or holding a worker, and resumes when the clock passes it."""
    answer = onboard.enqueue(key="acme")
    [first] = jobs.run()
    assert (first.outcome, str(first.error)) == ("retried", "the mail server is down")
    assert events("acme") == ["provision", "welcome:pro"]
    assert steps(answer.id) == [("provision", "step", "done")]  # the failure: nothing

    jobs.travel(seconds=1)
    [second] = jobs.run()
    assert second.outcome == "suspended"
    # provision came from storage (called once ever); the email ran again with its
    # stored input, then the run parked on the sleep.
    assert events("acme") == ["provision", "welcome:pro", "welcome:pro"]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner) == ("suspended", 1, None)
    assert job.run_at - jobs.now() > timedelta(days=3) - timedelta(seconds=5)
    assert steps(answer.id) == [
        ("provision", "step", "done"),
        ("welcome-email", "step", "done"),
        ("sleep:3d", "sleep", "waiting"),
    ]

    # Holds no worker: nothing to run until the clock passes the wake time.
    jobs.travel(timedelta(days=3) - timedelta(seconds=2))
    assert jobs.run() == []
    assert state(answer.id) == ("suspended", 1)
    jobs.travel(seconds=3)
    [third] = jobs.run()
    assert third.outcome == "completed"
    assert events("acme") == ["provision", "welcome:pro", "welcome:pro", "nudge"]
    # Two attempts in all: the sleep spent none (the resumed run is attempt 2 again).
    assert state(answer.id) == ("done", 2)
    assert [s[2] for s in steps(answer.id)] == ["done"] * 4


def test_a_step_name_twice_in_one_attempt_is_refused(jobs, clean_registry):
    """S2: the name is the replay key; a repeat is StepDuplicate, never an overwrite."""

    @job(name="tests.twice", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def twice(run):
        run.step("a", lambda: 1)
        run.step("a", lambda: 2)

    twice.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert isinstance(attempt.error, StepDuplicate)
    assert attempt.error.code == "X_STEP_DUPLICATE"
    [(output,)] = JobStep.objects.values_list("output")
    assert output == 1


def test_fn_may_take_the_token_results_are_json_and_bad_results_record_nothing(
    jobs, clean_registry
):
    """S1: fn of no argument or of the cancel token; the answer is the JSON value,
    the same on the first run and on replay; a result JSON cannot hold is refused."""
    seen = {}

    @job(name="tests.shapes", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def shapes(run):
        seen["token"] = run.step("token", lambda token: token is run.cancel_token)
        seen["tuple"] = run.step("tuple", lambda: (1, "a"))
        run.step("set", lambda: {1, 2})

    shapes.enqueue()
    [attempt] = jobs.run()
    assert seen == {"token": True, "tuple": [1, "a"]}
    assert isinstance(attempt.error, InvalidArgument)
    assert "result of step 'set'" in str(attempt.error)
    assert [s[0] for s in steps(attempt.job_id)] == ["token", "tuple"]


def test_a_name_recorded_as_another_kind_is_refused(jobs, clean_registry):
    """S2: step names must be deterministic; a sleep replayed as a step is an error."""

    @job(name="tests.kinds", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def kinds(run, as_step: bool = False):
        if as_step:
            run.step("wait", lambda: 1)
        else:
            run.sleep("wait", "1m")

    answer = kinds.enqueue()
    assert [a.outcome for a in jobs.run()] == ["suspended"]
    Job.objects.filter(pk=answer.id).update(input={"as_step": True})
    jobs.travel(minutes=2)
    [attempt] = jobs.run()
    assert isinstance(attempt.error, InvalidArgument)
    assert "recorded as a sleep step" in str(attempt.error)


def test_a_cancelled_token_refuses_new_steps(jobs, clean_registry):
    """S6: past the cancel no step starts (JobAborted)."""
    calls = []

    @job(name="tests.cancelled", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def cancelled(run):
        run.cancel_token.cancel("CANCELLED")
        run.step("never", lambda: calls.append(1))

    cancelled.enqueue()
    [attempt] = jobs.run()
    assert isinstance(attempt.error, JobAborted)
    assert calls == []
    assert JobStep.objects.count() == 0


def test_a_swallowed_suspension_still_suspends(jobs, caplog):
    """S3: RunSuspended is a BaseException; a body that catches it anyway is parked."""
    answer = swallower.enqueue(key="sw")
    [attempt] = jobs.run()
    assert attempt.outcome == "suspended"
    assert "jobs.suspension.swallowed" in caplog.messages
    assert events("sw") == ["swallowed", "went-on"]
    jobs.travel(hours=1, seconds=1)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("sw") == ["swallowed", "went-on", "went-on"]
    assert state(answer.id) == ("done", 1)


def test_an_async_body_uses_steps_through_sync_to_async(jobs):
    """J6 with S1/S3: the step API called from an async body."""
    answer = async_steps.enqueue(key="as")
    assert [a.outcome for a in jobs.run()] == ["suspended"]
    jobs.travel(hours=2)
    assert [a.outcome for a in jobs.run()] == ["completed"]
    assert events("as") == ["after:41"]
    assert steps(answer.id) == [
        ("first", "step", "done"),
        ("sleep:1h", "sleep", "done"),
    ]


def test_steps_appear_in_the_job_json_and_go_with_the_job(jobs):
    """P3 (steps: name, state, started, finished) and S8 (kept for the whole run,
    removed with the job)."""
    answer = onboard.enqueue(key="json", email_failures=0)
    jobs.run()
    shown = api.get(answer.id)["steps"]
    assert [(s["name"], s["kind"], s["state"]) for s in shown] == [
        ("provision", "step", "done"),
        ("welcome-email", "step", "done"),
        ("sleep:3d", "sleep", "waiting"),
    ]
    assert all(s["started"] for s in shown)
    assert shown[0]["finished"] >= shown[0]["started"]
    assert shown[2]["finished"] is None
    api.cancel(answer.id)
    assert JobStep.objects.filter(job_id=answer.id).count() == 3  # kept while retained
    api.remove(answer.id)
    assert JobStep.objects.filter(job_id=answer.id).count() == 0


def test_promote_ends_a_sleep_now(jobs):
    """S3 with P2: "run now" on a sleeping job ends its sleep instead of re-parking."""
    answer = onboard.enqueue(key="promote", email_failures=0)
    assert [a.outcome for a in jobs.run()] == ["suspended"]
    api.promote(answer.id)
    assert [a.outcome for a in jobs.run()] == ["completed"]
    assert events("promote")[-1] == "nudge"


def test_retry_from_step_drops_that_step_and_every_later_one(jobs):
    """P2: a requeue replays completed steps; from_step runs them again."""
    answer = fan_out.enqueue(key="fan", children=["a", "b", "c"])
    jobs.run()
    assert events("fan") == ["enqueue:a", "enqueue:b", "enqueue:c"]
    api.retry(answer.id)
    jobs.run()
    assert events("fan") == ["enqueue:a", "enqueue:b", "enqueue:c"]  # all replayed
    with pytest.raises(InvalidArgument, match="from_step"):
        api.retry(answer.id, from_step="enqueue:zz")
    assert state(answer.id)[0] == "done"  # the refused retry changed nothing
    api.retry(answer.id, from_step="enqueue:b")
    jobs.run()
    assert events("fan") == [
        "enqueue:a",
        "enqueue:b",
        "enqueue:c",
        "enqueue:b",
        "enqueue:c",
    ]
    # The children had finished (their keys free), so b and c were enqueued again.
    assert Job.objects.filter(name=fan_child.name).count() == 5


def test_during_a_drain_a_finished_step_is_kept_and_a_sleep_still_parks(
    jobs, clean_registry
):
    """S6 with W6: the row is still this worker's while it drains: the step whose
    function returned is recorded, no new step starts (interrupted, not counted), and
    a sleep suspends the run instead."""

    @job(name="tests.drained", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def drained(run, park: bool = False):
        run.step("first", lambda: run.cancel_token.cancel("DRAINING") and 1)
        if park:
            run.sleep("1h")
        run.step("second", lambda: 2)

    first = drained.enqueue()
    [attempt] = jobs.run(until_idle=False)  # interrupted: due again at once
    assert attempt.outcome == "interrupted"
    assert isinstance(attempt.error, JobAborted)
    assert steps(first.id) == [("first", "step", "done")]
    assert state(first.id) == ("ready", 0)
    api.cancel(first.id)

    second = drained.enqueue(park=True)
    [attempt] = jobs.run()
    assert attempt.outcome == "suspended"
    assert state(second.id) == ("suspended", 0)
