"""What a failed attempt becomes: one pure decision from the row, the error and the
definition (R1-R3, J5), written afterwards by whichever path saw the failure.

The executor (a body that raised, a payload that did not decode, a timeout) and
admission (a concurrency key that raised before the body ran) both ask ``decide`` and
only then write its answer; neither re-derives the policy. Pure: no database, no
settings, no clock; the jitter's source can be passed in, so the decision is a table.

* the error is terminal (``Terminal``, a terminal ``JobsError``, a class registered
  "terminal"), or the attempt was the last one: the run stops, ``dead`` when the job
  dead-letters (the default), ``failed`` when it declared ``dead_letter=False``;
* otherwise it is retried after the job's backoff (``Retry.next_delay``), or after the
  time a ``RetryAfter`` named (``Retry.stated``): ``delayed``, or ``ready`` when the
  wait is zero. A row whose job is not declared here (an unknown name) dead-letters
  when it stops and waits ``UNDECLARED_DELAY`` seconds when retried;
* the error says the server refused a NEW connection (``refused_connection``: "too
  many clients", "remaining connection slots are reserved", SQLSTATE 53300): an
  infrastructure failure, not the job's (issue 31). Like an attempt the drain
  interrupted (W6, W9: "attempt NOT counted") the attempt is not counted, so it never
  dead-letters, whatever attempt it was; unlike it the row waits the job's backoff
  (at least ``REFUSED_MIN_DELAY``) so a full server is not asked again at once
  (``Verdict.counted`` False: the executor hands the row back, job_hand_back).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, TypedDict

import psycopg
from django.db import OperationalError as DjangoOperationalError

from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.declaration.retry import classify
from ultimate_jobs.ground.exceptions import QueryError

State = Literal["dead", "failed", "delayed", "ready"]
StopReason = Literal["terminal", "attempts-exhausted"]
# The wait before retrying a row whose job is not declared in this process.
UNDECLARED_DELAY = 5.0
# The least wait of an attempt whose body the server refused a connection (issue 31).
REFUSED_MIN_DELAY = 1.0
# What PostgreSQL answers a session it refuses for want of slots (SQLSTATE 53300,
# too_many_connections); libpq passes it on as the text of a failed connect.
REFUSED_TEXTS = ("too many clients", "remaining connection slots are reserved")
TOO_MANY_CONNECTIONS = "53300"
# The errors a refused connect arrives as: psycopg's, Django's wrapper of it, and the
# package's own statement error. A body's own exception that merely says the words
# (a ValueError("too many clients")) is the job's failure like any other.
CONNECT_ERRORS = (psycopg.OperationalError, DjangoOperationalError, QueryError)


class Tries(TypedDict):
    """What the decision reads of a claimed row (a ClaimedJob is one)."""

    attempt: int
    max_attempts: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """The state a failed attempt leaves its row in, why it stopped, or how long it
    waits before its next try (seconds)."""

    state: State
    stop_reason: StopReason | None = None  # None: retried
    delay: float | None = None  # None: stopped
    counted: bool = True  # False: the attempt is given back (a refused connection)

    @property
    def stops(self) -> bool:
        """Whether the run ends here (dead or failed) rather than being retried."""
        return self.stop_reason is not None


def decide(
    row: Tries,
    error: BaseException,
    definition: JobDefinition | None,
    *,
    rng: random.Random | None = None,
) -> Verdict:
    """The one verdict on a failed attempt of ``row`` that raised ``error``."""
    retry = definition.retry if definition is not None else None
    if refused_connection(error):  # the server's failure, not the job's (issue 31)
        wait = retry.next_delay(row["attempt"], rng) if retry else UNDECLARED_DELAY
        return Verdict("delayed", delay=max(wait, REFUSED_MIN_DELAY), counted=False)
    verdict = classify(error)
    if verdict == "terminal" or row["attempt"] >= row["max_attempts"]:
        stop: StopReason = "terminal" if verdict == "terminal" else "attempts-exhausted"
        dead_letter = definition.dead_letter if definition is not None else True
        return Verdict("dead" if dead_letter else "failed", stop_reason=stop)
    if isinstance(verdict, float):  # RetryAfter named the time
        delay = retry.stated(verdict, rng) if retry is not None else verdict
    elif retry is not None:
        delay = retry.next_delay(row["attempt"], rng)
    else:
        delay = UNDECLARED_DELAY
    return Verdict("delayed" if delay > 0 else "ready", delay=delay)


def refused_connection(error: BaseException) -> bool:
    """Whether ``error`` (or an exception it was raised from) is the server refusing
    a new session for want of connection slots: SQLSTATE 53300, or a connection
    error (``CONNECT_ERRORS``) carrying the server's refusal text (libpq reports a
    refused connect as text, without a SQLSTATE)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "sqlstate", None) == TOO_MANY_CONNECTIONS:
            return True
        if isinstance(current, CONNECT_ERRORS):
            text = str(current).lower()
            if any(marker in text for marker in REFUSED_TEXTS):
                return True
        current = current.__cause__ or current.__context__
    return False
