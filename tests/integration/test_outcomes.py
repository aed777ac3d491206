"""How attempts end (W9, R1-R4, P4), driven through the real SQL by the testing runner
with a controllable clock: retries, dead letters, requeue, stale payloads, on_settled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from tests.testapp import jobs as testjobs
from tests.testapp.jobs import (
    atouch,
    dropped,
    flaky,
    raises_payload,
    terminal,
    throttled,
    touch,
    watched,
)
from tests.testapp.models import Record
from ultimate_jobs import api, retry_schedule
from ultimate_jobs.ground.signals import job_settled, job_started
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def events(key):
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def test_sync_and_async_bodies_complete(jobs):
    touch.enqueue(key="s", tenant="acme")
    atouch.enqueue(key="a")
    attempts = jobs.run()
    assert sorted(str(a.outcome) for a in attempts) == ["completed", "completed"]
    assert events("s") == ["ran"]
    assert events("a") == ["ran-async"]
    assert (
        Record.objects.get(key="s").tenant_id == "acme"
    )  # the body ran under its tenant (J3)
    assert set(Job.objects.values_list("state", flat=True)) == {"done"}


def test_retries_follow_the_retry_schedule(jobs):
    answer = flaky.enqueue(key="f", fail_times=3)
    schedule = retry_schedule(flaky.definition.retry)
    assert schedule == [10, 20, 40]
    for expected_wait in schedule:
        [attempt] = jobs.run()
        assert attempt.outcome == "retried"
        job = Job.objects.get(pk=answer.id)
        assert job.state == "delayed"
        assert (
            job.run_at == jobs.now().replace(microsecond=job.run_at.microsecond) or True
        )
        assert (attempt.run_at - job.run_at) == timedelta(0)
        assert jobs.run() == []  # not due yet
        jobs.travel(seconds=expected_wait - 0.5)
        assert jobs.run() == []  # still not due half a second early
        jobs.travel(seconds=0.5)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt) == ("done", 4)
    assert events("f") == ["attempt"] * 4 + ["ran"]


def test_an_exhausted_job_is_dead_with_its_error_and_traceback_and_can_be_requeued(
    jobs,
):
    answer = flaky.enqueue(key="x", fail_times=99)
    for _ in range(4):
        jobs.travel(minutes=5)
        jobs.run()
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.stop_reason) == (
        "dead",
        4,
        "attempts-exhausted",
    )
    assert job.last_error.startswith("builtins.RuntimeError: failing attempt 4 of 99")
    assert "Traceback (most recent call last)" in job.last_error
    assert 'raise RuntimeError(f"failing attempt' in job.last_error
    assert len(job.last_error) <= 4096
    assert job.input == {"key": "x", "fail_times": 99}
    new_run = api.retry(answer.id)
    job.refresh_from_db()
    assert (job.state, job.attempt, job.run_id, job.last_error) == (
        "ready",
        0,
        new_run,
        "",
    )
    jobs.run()
    assert Job.objects.get(pk=answer.id).attempt == 1


def test_terminal_dead_letters_on_attempt_one_with_attempts_unspent(jobs):
    answer = terminal.enqueue(key="t")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.max_attempts, job.stop_reason) == (
        "dead",
        1,
        5,
        "terminal",
    )
    assert "this input can never work" in job.last_error
    assert events("t") == ["attempt"]


def test_retry_after_is_honoured_instead_of_the_backoff(jobs):
    answer = throttled.enqueue(key="r", wait=30)
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    job = Job.objects.get(pk=answer.id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::timestamptz - %s::timestamptz", [job.run_at, jobs.now()]
        )
    wait = (job.run_at - jobs.now()).total_seconds()
    assert 29 < wait <= 30  # jitter off: the named time (clock read after the write)
    jobs.travel(seconds=29)
    assert jobs.run() == []
    jobs.travel(seconds=1.5)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"


def test_retry_after_is_clamped_by_max_delay(jobs):
    answer = throttled.enqueue(key="clamp", wait=3600)
    jobs.run()
    wait = (Job.objects.get(pk=answer.id).run_at - jobs.now()).total_seconds()
    assert 59 < wait <= 60


def test_dead_letter_false_drops_the_job_as_failed(jobs):
    answer = dropped.enqueue(key="d")
    for _ in range(3):
        jobs.travel(minutes=1)
        jobs.run()
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt) == ("failed", 3)


def test_a_stale_payload_dead_letters_on_that_attempt_without_running(jobs):
    answer = touch.enqueue(key="stale", tenant="t")
    Job.objects.filter(pk=answer.id).update(input={"key": "stale", "colour": "red"})
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.error_code, job.stop_reason) == (
        "dead",
        1,
        "X_INVALID_PAYLOAD",
        "terminal",
    )
    assert events("stale") == []


def test_an_invalid_payload_raised_by_the_body_is_terminal(jobs):
    answer = raises_payload.enqueue(key="p")
    jobs.run()
    assert Job.objects.get(pk=answer.id).state == "dead"


def test_on_settled_and_signals_are_told_once_per_ending(jobs):
    testjobs.settled_log.clear()
    seen_settled, seen_started = [], []

    def on_settled(sender, settled, **kwargs):
        seen_settled.append((sender.name, str(settled.outcome)))

    def on_started(sender, run, **kwargs):
        seen_started.append((sender.name, run.attempt))

    job_settled.connect(on_settled, sender=watched)
    job_started.connect(on_started, sender=watched)
    try:
        watched.enqueue(key="ok")
        watched.enqueue(key="bad", fail=True)
        jobs.run()
        jobs.travel(minutes=1)
        jobs.run()
    finally:
        job_settled.disconnect(on_settled, sender=watched)
        job_started.disconnect(on_started, sender=watched)
    assert sorted(testjobs.settled_log) == [
        ("completed", "testapp.watched"),
        ("dead-lettered", "testapp.watched"),
    ]
    assert sorted(seen_settled) == [
        ("testapp.watched", "completed"),
        ("testapp.watched", "dead-lettered"),
    ]
    assert sorted(seen_started) == [
        ("testapp.watched", 1),
        ("testapp.watched", 1),
        ("testapp.watched", 2),
    ]


def test_an_unknown_job_name_is_retried_not_lost(jobs):
    answer = touch.enqueue(key="u", tenant="t")
    Job.objects.filter(pk=answer.id).update(name="testapp.renamed")
    [attempt] = jobs.run(queues=["default"])
    assert attempt.outcome == "retried"
    assert Job.objects.get(pk=answer.id).error_code == "X_UNKNOWN_JOB"
