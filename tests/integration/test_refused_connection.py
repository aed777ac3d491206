"""A body the server refused a NEW connection (max_connections: "too many clients",
"remaining connection slots are reserved") failed for the infrastructure, not for the
job (issue 31): its attempt is not counted (as a drain's interrupted attempt, W6/W9),
the row waits the job's backoff and it never dead-letters for it, even on its only
attempt. Any other error still follows R1-R2."""

from __future__ import annotations

import psycopg
import pytest
from django.db.utils import OperationalError

from ultimate_jobs import NO_TENANT, Retry, job
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db

REFUSALS = (
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: '
    "FATAL:  sorry, too many clients already",
    'connection failed: connection to server on socket "/tmp/.s.PGSQL.5432" failed: '
    "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER "
    "attribute",
)


def refused(text: str) -> OperationalError:
    """What Django raises when its connect is refused: psycopg's error as the cause."""
    try:
        raise psycopg.OperationalError(text)
    except psycopg.OperationalError as cause:
        error = OperationalError(*cause.args)
        error.__cause__ = cause
        return error


def test_a_refused_connection_never_spends_an_attempt_nor_dead_letters(jobs):
    calls: list[int] = []

    @job(
        name="tests.refused_body",
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retry=Retry(attempts=1, delay="2s", jitter=False),
    )
    def refused_body(run):
        calls.append(run.attempt)
        if len(calls) <= len(REFUSALS):
            raise refused(REFUSALS[len(calls) - 1])

    answer = refused_body.enqueue()
    for _ in REFUSALS:
        [attempt] = jobs.run()
        assert attempt.outcome == "interrupted"
        row = Job.objects.get(pk=answer.id)
        assert (row.state, row.attempt, row.stop_reason) == ("delayed", 0, "")
        assert jobs.run() == []  # it waits the backoff: the server is not asked again
        jobs.travel(seconds=2)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.attempt) == ("done", 1)
    assert calls == [1, 1, 1]  # the same attempt each time: none was spent


def test_any_other_operational_error_still_dead_letters_on_the_last_attempt(jobs):
    @job(
        name="tests.broken_body",
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retry=Retry(attempts=1, jitter=False),
    )
    def broken_body(run):
        raise refused("server closed the connection unexpectedly")

    answer = broken_body.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.attempt, row.stop_reason) == (
        "dead",
        1,
        "attempts-exhausted",
    )
