"""A job's attempt history as operators read it (P6): the kept attempts, oldest first,
then the job row's own latest attempt when no kept row holds it yet.

Errors are shown redacted (B5) exactly like the job's ``last_error``.
"""

from __future__ import annotations

from typing import Any

from ultimate_jobs.models import Attempt, Job
from ultimate_jobs.observability.redaction import shown_row
from ultimate_jobs.observability.triage import fingerprint

# How the job row's state names the way its latest attempt ended (W9).
ROW_OUTCOMES = {
    "running": "running",
    "done": "completed",
    "dead": "dead-lettered",
    "cancelled": "cancelled",
}


def row_outcome(job: Job) -> str:
    """The outcome of the attempt the job row holds."""
    if job.state == "failed":
        return "refused" if job.stop_reason == "refused" else "dropped"
    return ROW_OUTCOMES.get(job.state, job.state)


def attempts_json(job: Job) -> list[dict[str, Any]]:
    """Every attempt of ``job`` (all its runs), oldest first (``jobs show --json``)."""
    view = shown_row(job)

    def when(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    # job.attempts: ordered by id (Attempt.Meta); for a job in history, its trail.
    kept: list[Attempt] = list(job.attempts.all())
    out = [
        {
            "attempt": row.attempt,
            "run_id": str(row.run_id),
            "outcome": row.outcome,
            "error": view.text(row.error),
            "error_code": row.error_code,
            "fingerprint": fingerprint(row.error),  # P10
            "started_at": when(row.started_at),
            "finished_at": when(row.finished_at),
            "worker_id": row.worker_id,
        }
        for row in kept
    ]
    # A kept row is the row's own latest attempt when it names the same run, number
    # and start: a retry, an abandon or a reschedule kept it, and no claim came since.
    held = {(row.run_id, row.attempt, row.started_at) for row in kept}
    if job.attempt > 0 and job.started_at is not None:
        if (job.run_id, job.attempt, job.started_at) not in held:
            outcome = row_outcome(job)
            # A retried attempt's error stays on the row until the next one ends
            # badly: a running or completed attempt has none of its own.
            error = "" if outcome in ("running", "completed") else job.last_error
            out.append(
                {
                    "attempt": job.attempt,
                    "run_id": str(job.run_id),
                    "outcome": outcome,
                    "error": view.text(error),
                    "error_code": job.error_code if error else "",
                    "fingerprint": fingerprint(error),
                    "started_at": when(job.started_at),
                    "finished_at": when(job.finished_at),
                    "worker_id": job.worker_id,
                }
            )
    return out
