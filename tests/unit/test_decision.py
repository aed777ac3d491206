"""The one failure decision (R1-R3, J5, issue 25 item 3), as a table: row x error x
definition -> Verdict. The executor and admission both write what it answers."""

from __future__ import annotations

import random

import django.db
import psycopg
import pytest

from ultimate_jobs.declaration.decision import UNDECLARED_DELAY, Verdict, decide
from ultimate_jobs.declaration.definition import NO_TENANT, JobDefinition
from ultimate_jobs.declaration.retry import Retry, register_error_retry
from ultimate_jobs.ground.exceptions import (
    EventTimeout,
    InvalidJobPayload,
    QueryError,
    RetryAfter,
    Terminal,
)


class Registered(Exception):
    """An application error registered as terminal."""


register_error_retry(Registered, "terminal")


def body(run):
    return None


def definition(*, dead_letter=True, **retry):
    return JobDefinition(
        name="decided",
        func=body,
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retry=Retry(jitter=False, **retry),
        dead_letter=dead_letter,
    )


EXP = definition(attempts=5, delay=2, max_delay="1m")
LINEAR = definition(attempts=5, backoff="linear", delay=3)
DROPS = definition(attempts=3, dead_letter=False)
PAYLOAD = InvalidJobPayload("decided", "x", 1, "not a string")


def row(attempt, max_attempts=5):
    return {"attempt": attempt, "max_attempts": max_attempts}


@pytest.mark.parametrize(
    ("tries", "error", "declared", "expected"),
    [
        # An ordinary exception with attempts left: the backoff curve.
        (row(1), ValueError("x"), EXP, Verdict("delayed", delay=2.0)),
        (row(3), ValueError("x"), EXP, Verdict("delayed", delay=8.0)),
        (row(4), ValueError("x"), EXP, Verdict("delayed", delay=16.0)),
        (row(2), ValueError("x"), LINEAR, Verdict("delayed", delay=6.0)),
        # Capped by max_delay.
        (row(4, 9), ValueError("x"), definition(delay=30, attempts=9),
         Verdict("delayed", delay=240.0)),
        (row(8, 9), ValueError("x"), EXP, Verdict("delayed", delay=60.0)),
        # The last attempt: dead, or failed for dead_letter=False.
        (row(5), ValueError("x"), EXP, Verdict("dead", "attempts-exhausted")),
        (row(7), ValueError("x"), EXP, Verdict("dead", "attempts-exhausted")),
        (row(3, 3), ValueError("x"), DROPS, Verdict("failed", "attempts-exhausted")),
        # Terminal errors stop at once, whatever attempts are left.
        (row(1), Terminal("stop"), EXP, Verdict("dead", "terminal")),
        (row(1), Terminal("stop"), DROPS, Verdict("failed", "terminal")),
        (row(1), PAYLOAD, EXP, Verdict("dead", "terminal")),
        (row(1), EventTimeout("decided", "s", "e"), EXP, Verdict("dead", "terminal")),
        (row(1), Registered(), EXP, Verdict("dead", "terminal")),
        # A retryable library error backs off like any exception.
        (row(1), QueryError("q", "down"), EXP, Verdict("delayed", delay=2.0)),
        # RetryAfter: the named time, clamped by max_delay; zero is ready at once.
        (row(1), RetryAfter(7), EXP, Verdict("delayed", delay=7.0)),
        (row(1), RetryAfter(3600), EXP, Verdict("delayed", delay=60.0)),
        (row(1), RetryAfter(0), EXP, Verdict("ready", delay=0.0)),
        # ... but never past the last attempt.
        (row(5), RetryAfter(7), EXP, Verdict("dead", "attempts-exhausted")),
        # A row whose job is not declared here: dead-letters when it stops.
        (row(1), ValueError("x"), None, Verdict("delayed", delay=UNDECLARED_DELAY)),
        (row(1), RetryAfter(9), None, Verdict("delayed", delay=9.0)),
        (row(5), ValueError("x"), None, Verdict("dead", "attempts-exhausted")),
        (row(1), Terminal("stop"), None, Verdict("dead", "terminal")),
    ],
)  # fmt: skip
def test_the_decision_table(tries, error, declared, expected):
    verdict = decide(tries, error, declared)
    assert verdict == expected
    assert verdict.stops is (expected.stop_reason is not None)


def test_jitter_draws_from_the_source_it_is_given():
    """Equal jitter: half of the curve fixed, the other half from ``rng``."""
    jittered = JobDefinition(
        name="decided",
        func=body,
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retry=Retry(attempts=5, delay=4),
    )
    first = decide(row(2), ValueError("x"), jittered, rng=random.Random(7))
    again = decide(row(2), ValueError("x"), jittered, rng=random.Random(7))
    assert first == again
    assert first.state == "delayed" and 4.0 <= (first.delay or 0) <= 8.0
    # A named time is never earlier than named: up to a tenth on top.
    named = decide(row(1), RetryAfter(10), jittered, rng=random.Random(7))
    assert 10.0 <= (named.delay or 0) <= 11.0


def test_every_state_of_a_verdict_reports_one_outcome():
    """The executor and admission report a verdict's state through one table."""
    from typing import get_args

    from ultimate_jobs.declaration.decision import State
    from ultimate_jobs.runtime.outcomes import FAILED_OUTCOMES, Outcome

    assert set(FAILED_OUTCOMES) == set(get_args(State))
    assert FAILED_OUTCOMES["dead"] is Outcome.DEAD_LETTERED
    assert FAILED_OUTCOMES["failed"] is Outcome.DROPPED


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("FATAL:  sorry, too many clients already"),
        django.db.OperationalError(
            "FATAL:  remaining connection slots are reserved for non-replication "
            "superuser connections"
        ),
        QueryError("connect", "FATAL:  sorry, too many clients already"),
    ],
)
def test_a_refused_connection_is_given_back_with_the_backoff_even_at_the_last(error):
    """Issue 31: the server refused a new session; W6/W9's uncounted attempt."""
    assert decide(row(4), error, EXP) == Verdict("delayed", delay=16.0, counted=False)
    assert decide(row(1), error, EXP) == Verdict("delayed", delay=2.0, counted=False)
    assert decide(row(1, 1), error, None) == Verdict(
        "delayed", delay=UNDECLARED_DELAY, counted=False
    )


def test_a_refusal_is_found_in_the_cause_chain():
    try:
        try:
            raise psycopg.OperationalError("FATAL:  sorry, too many clients already")
        except psycopg.OperationalError as cause:
            raise RuntimeError("the body's query failed") from cause
    except RuntimeError as error:
        assert decide(row(5), error, EXP).counted is False
    assert decide(row(5), RuntimeError("too many cooks"), EXP).counted is True


def test_a_bodys_own_error_that_says_the_words_is_the_jobs_failure():
    """Only a connection error carries the refusal: a body raising its own
    ValueError("too many clients") dead-letters on its last attempt like any other."""
    error = ValueError("sorry, too many clients already")
    assert decide(row(5), error, EXP) == Verdict("dead", "attempts-exhausted")
