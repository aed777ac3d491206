"""Operator verbs shared by the admin, ``manage.py jobs`` and Python callers (P2, L4).

Each verb runs one fenced statement and, when it moves nothing, reads the row once to
say exactly why (not found, live, running, or a key a live job holds).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import transaction

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.exceptions import (
    InvalidArgument,
    JobDuplicate,
    JobNotCancellable,
    JobNotFound,
    JobNotPromotable,
    JobNotRemovable,
    JobNotRequeueable,
    QueryError,
)
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import FINISHED_STATES, Job, QueuePause
from ultimate_jobs.queues import validate_queue
from ultimate_jobs.sql import QUERIES


def _db() -> DjangoDatabase:
    return DjangoDatabase(get_settings().DATABASE)


def _job_id(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument("id", value, "a job id is a UUID") from None


def _existing(job_id: uuid.UUID) -> Job:
    job = Job.objects.using(get_settings().DATABASE).filter(pk=job_id).first()
    if job is None:
        raise JobNotFound(job_id)
    return job


def retry(job_id: object, *, from_step: str | None = None) -> uuid.UUID:
    """Requeue one finished job as a fresh run (attempt 0, due now); answers its run id.

    Its completed steps replay from storage; ``from_step`` drops that step and every
    later one first, so they run again (P2). A live job is JobNotRequeueable; one whose
    key a live job now holds is JobDuplicate.
    """
    if from_step is None:
        return _requeue(_job_id(job_id))
    pk = _job_id(job_id)
    with transaction.atomic(using=get_settings().DATABASE):
        dropped = _db().run(QUERIES["step_drop_from"], job_id=pk, name=from_step)
        run_id = _requeue(pk)  # refused: the drop rolls back with it
        if not dropped:
            raise InvalidArgument("from_step", from_step, "the job has no such step")
    return run_id


def _requeue(pk: uuid.UUID) -> uuid.UUID:
    run_id = uuid7()
    try:
        # A savepoint when the caller holds a transaction: a refused requeue leaves
        # it usable for the reads that say why.
        with transaction.atomic(using=get_settings().DATABASE):
            rows = _db().run(QUERIES["job_requeue"], id=pk, run_id=run_id, now=None)
    except QueryError as exc:
        if (
            isinstance(exc.__cause__, psycopg.errors.UniqueViolation)
            or "unique" in str(exc.__cause__).lower()
        ):
            job = _existing(pk)
            raise JobDuplicate(job.name, job.idempotency_key, None) from exc
        raise
    if rows:
        return run_id
    job = _existing(pk)
    if job.state not in FINISHED_STATES:
        raise JobNotRequeueable(pk, job.state)
    raise JobDuplicate(job.name, job.idempotency_key, _live_holder(job))


def _live_holder(job: Job) -> uuid.UUID | None:
    holder = (
        Job.objects.using(get_settings().DATABASE)
        .filter(
            name=job.name, tenant_id=job.tenant_id, idempotency_key=job.idempotency_key
        )
        .exclude(state__in=FINISHED_STATES)
        .values_list("id", flat=True)
        .first()
    )
    return holder


def cancel(job_id: object, reason: str = "") -> None:
    """Cancel one live job: a queued one at once, a running one at its next heartbeat."""
    pk = _job_id(job_id)
    if _db().run(QUERIES["job_cancel"], id=pk, reason=reason[:1000], now=None):
        return
    raise JobNotCancellable(pk, _existing(pk).state)


def remove(job_id: object) -> None:
    """Delete one job that is not running (cancel a running one first)."""
    pk = _job_id(job_id)
    if _db().run(QUERIES["job_remove"], id=pk):
        return
    raise JobNotRemovable(pk, _existing(pk).state)


def promote(job_id: object) -> None:
    """Make a job that waits on its run time due now."""
    pk = _job_id(job_id)
    if _db().run(QUERIES["job_promote"], id=pk, now=None):
        return
    raise JobNotPromotable(pk, _existing(pk).state)


def pause_queue(queue: str, *, by: str = "") -> bool:
    """Pause a queue: no worker claims from it from its next claim on; enqueues land.
    Answers whether it was running (False: it was paused already)."""
    return bool(
        _db().run(
            QUERIES["queue_pause"], queue=validate_queue(queue), paused_by=by[:255]
        )
    )


def resume_queue(queue: str) -> bool:
    """Resume a paused queue; answers whether it was paused."""
    return bool(_db().run(QUERIES["queue_resume"], queue=validate_queue(queue)))


def paused_queues() -> list[str]:
    """The paused queues, by name."""
    return list(
        QueuePause.objects.using(get_settings().DATABASE)
        .order_by("queue")
        .values_list("queue", flat=True)
    )


def get(job_id: object) -> dict[str, Any]:
    """One job as the stable JSON of ``manage.py jobs show --json`` (P3)."""
    return job_json(_existing(_job_id(job_id)))


def job_json(job: Job) -> dict[str, Any]:
    """The documented JSON shape of a job (docs/operations.md)."""

    def when(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": str(job.id),
        "run_id": str(job.run_id),
        "name": job.name,
        "queue": job.queue,
        "priority": job.priority,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "tenant_id": job.tenant_id,
        "idempotency_key": job.idempotency_key,
        "input": job.input,
        "run_at": when(job.run_at),
        "created_at": when(job.created_at),
        "started_at": when(job.started_at),
        "finished_at": when(job.finished_at),
        "last_error": job.last_error,
        "error_code": job.error_code,
        "stop_reason": job.stop_reason,
        "progress": job.progress,
        "correlation_id": job.correlation_id,
        "enqueued_by": job.enqueued_by,
        "worker_id": job.worker_id,
        # The current stage's steps, oldest first (prefetch_related("steps") in lists).
        "steps": [
            {
                "name": step.name,
                "kind": step.kind,
                "state": step.status,
                "started": when(step.started_at),
                "finished": when(step.finished_at),
            }
            for step in job.steps.all()
            if not step.archived
        ],
    }


BULK_LIMIT = 1000
_BULK = {
    "retry": ("requeue", ("done", "failed", "dead", "cancelled")),
    "cancel": ("cancel", ("ready", "delayed", "running", "suspended")),
    "remove": (
        "remove",
        ("ready", "delayed", "suspended", "done", "failed", "dead", "cancelled"),
    ),
    "promote": ("promote", ("delayed", "suspended")),
}


def bulk(
    verb: str,
    *,
    state: str,
    queue: str | None = None,
    name: str | None = None,
    tenant_id: str | None = None,
    reason: str = "",
) -> dict[str, int]:
    """Apply ``verb`` (retry, cancel, remove, promote) to at most 1,000 matching jobs.

    Answers ``{"affected": n, "remaining": m}``: ``remaining`` is what another call could
    still move (a row whose key a live job holds is not counted), so calling until it is
    zero ends. Each row moves through the same fenced statement as the single verb.
    """
    if verb not in _BULK:
        raise InvalidArgument("verb", verb, f"one of {', '.join(_BULK)}")
    kind, states = _BULK[verb]
    if state not in states:
        raise InvalidArgument(
            "state", state, f"{verb} takes one of {', '.join(states)}"
        )
    rows = _db().run(
        QUERIES["job_bulk_candidates"],
        state=state,
        queue=queue,
        name=name,
        tenant_id=tenant_id,
        requeue=kind == "requeue",
        limit=BULK_LIMIT,
    )
    single: dict[str, Callable[[object], object]] = {
        "retry": retry,
        "remove": remove,
        "promote": promote,
    }
    affected = 0
    for row in rows:
        try:
            if verb == "cancel":
                cancel(row["id"], reason)
            else:
                single[verb](row["id"])
        except (
            JobNotRequeueable,
            JobNotCancellable,
            JobNotRemovable,
            JobNotPromotable,
            JobDuplicate,
        ):
            continue  # it moved on (or a key was taken) between the read and the write
        affected += 1
    return {"affected": affected, "remaining": rows[0]["remaining"] if rows else 0}
