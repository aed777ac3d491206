"""One wording for every action result and refusal the admin shows (issue 15).

An action that moved a job says ``Job <id>: retried.``; one that was refused says why
in a sentence an operator can act on (``Job <id> is already done; it cannot be
cancelled.``), never a bare error code. The code is kept in brackets for searching.
"""

from __future__ import annotations

from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobDuplicate,
    JobNotCancellable,
    JobNotFound,
    JobNotPromotable,
    JobNotRemovable,
    JobNotRequeueable,
    JobsError,
)

# The past tense of each verb, as the result messages say it.
DONE = {
    "retry": "retried",
    "cancel": "cancelled",
    "promote": "promoted (due now)",
    "remove": "removed",
}


def moved(job_id: object, verb: str) -> str:
    """What one successful action did: ``Job <id>: retried.``"""
    return f"Job {job_id}: {DONE.get(verb, verb)}."


def refused(job_id: object, exc: JobsError) -> str:
    """Why an action on ``job_id`` was refused, in a sentence."""
    state = getattr(exc, "state", "")
    if isinstance(exc, JobNotCancellable):
        why = f"is already {state}; it cannot be cancelled"
    elif isinstance(exc, JobNotRequeueable):
        why = f"is {state}; only a finished job (done, failed, dead, cancelled) can be retried"
    elif isinstance(exc, JobNotRemovable):
        why = f"is {state}; cancel it before removing it"
    elif isinstance(exc, JobNotPromotable):
        why = f"is {state}; only a delayed or suspended job can be run now"
    elif isinstance(exc, JobDuplicate):
        why = (
            f"cannot be retried: live job {exc.existing_id} holds its idempotency key "
            f"{exc.idempotency_key!r}"
        )
    elif isinstance(exc, JobNotFound):
        why = "no longer exists"
    elif isinstance(exc, InvalidArgument) and exc.field == "from_step":
        why = f"has no step {exc.value!r} to retry from"
    else:
        why = f"was refused: {exc.message}"
    return f"Job {job_id} {why}. [{exc.code}]"


def bulk_summary(
    verb: str, done: int, refusals: int, remaining: int, limit: int
) -> str:
    """The one line a bulk action answers (P2: affected and remaining)."""
    return (
        f"{verb.capitalize()}: {done} job{'s' if done != 1 else ''} "
        f"{DONE.get(verb, verb)}, {refusals} refused, {remaining} not reached "
        f"(at most {limit} per action; run it again for the rest)."
    )
