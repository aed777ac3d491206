"""Deadlines (S6) through the testing runner: the timer cancels the run's token at the
deadline; the attempt fails with JobTimeout when the body ends (a worker fails it at the
deadline itself: tests/acceptance/test_durable_processes.py)."""

from __future__ import annotations

import pytest

from tests.testapp.durable_jobs import bounded, events, slow_step
from ultimate_jobs import JobTimeout
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def test_timeout_cancels_the_token_then_fails_the_attempt(jobs):
    answer = bounded.enqueue(key="honour")
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    assert isinstance(attempt.error, JobTimeout)
    assert "ran past its timeout (0.3s)" in str(attempt.error)
    assert events("honour") == ["started", "cancelled:TIMEOUT"]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.error_code, job.attempt) == ("delayed", "X_JOB_TIMEOUT", 1)


def test_a_body_that_ignores_the_token_has_its_step_writes_refused_and_is_logged(
    jobs, caplog
):
    answer = bounded.enqueue(key="ignore", ignore=0.8)
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    assert isinstance(attempt.error, JobTimeout)
    assert events("ignore") == ["started", "late-step-refused"]
    assert JobStep.objects.filter(job_id=answer.id).count() == 0
    assert "jobs.timeout.abandoned" in caplog.messages


def test_step_timeout_cancels_the_token_and_fails_the_step_and_the_attempt(jobs):
    answer = slow_step.enqueue(key="slow")
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    assert isinstance(attempt.error, JobTimeout)
    assert "step 'slow' ran past its step_timeout (0.3s)" in str(attempt.error)
    assert events("slow") == ["step-saw:TIMEOUT"]
    assert list(
        JobStep.objects.filter(job_id=answer.id).values_list("name", flat=True)
    ) == ["fast"]
