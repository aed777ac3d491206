"""Admission: what happens to a claimed row before its body may run (L2).

``admit`` triages each claimed row: a refusal the claim already settled
(``when_busy="fail"``) is announced; a keyed run whose row carries no key (enqueued
before its job declared ``Concurrency(key=...)``, say in a rolling deploy) gets its key
stored and is handed back, so the claim decides on it from then on.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.decision import decide
from ultimate_jobs.declaration.definition import Concurrency
from ultimate_jobs.declaration.registry import Declared, Registry
from ultimate_jobs.enqueue.rows import concurrency_key_of
from ultimate_jobs.ground.exceptions import JobKeyBusy, JobsError, QueryError
from ultimate_jobs.limits.slots import keyed_lease_key
from ultimate_jobs.observability.redaction import logged_correlation
from ultimate_jobs.runtime.outcomes import FAILED_OUTCOMES, Outcome, announce
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)


class Admission(enum.StrEnum):
    """What happens to a claimed row before its body may run."""

    RUN = "run"
    REFUSED = (
        "refused"  # when_busy="fail": the claim settled it failed (X_JOB_KEY_BUSY)
    )
    DEFERRED = "deferred"  # its key was stored and the row handed back
    FAILED = "failed"  # its key could not be computed: the ordinary failure path


def admit(
    db: Database, jobs: Registry, row: ClaimedJob, *, now: Any = None
) -> Admission:
    """Triage one claimed row (the claim's ``refused`` flag is popped)."""
    if row["refused"]:
        _announce_refused(jobs, row)
        return Admission.REFUSED
    if row.get("lease_key") is not None or row["name"] not in jobs:
        return Admission.RUN
    handle = jobs.get(row["name"])
    if not isinstance(handle.definition.concurrency, Concurrency):
        return Admission.RUN
    return _store_key(db, handle, row, now)


def _fields(row: ClaimedJob) -> dict[str, Any]:
    return {
        "job_id": str(row["id"]),
        "job_name": row["name"],
        "queue": row["queue"],
        "attempt": row["attempt"],
        "tenant_id": row["tenant_id"],
        "correlation_id": logged_correlation(row),
    }


def _decoded(handle: Declared, row: ClaimedJob) -> dict[str, Any] | None:
    definition = handle.definition
    try:
        return payload.decode(
            definition.name,
            definition.signature,
            row["input"],
            max_depth=get_settings().MAX_INPUT_DEPTH,
            version=definition.version,
            upgrade=definition.upgrade,
        )
    except JobsError:
        return None


def _announce_refused(jobs: Registry, row: ClaimedJob) -> None:
    error = JobKeyBusy(
        f"{row['name']}: every slot of {row['lease_key']} is held by another run",
        lease_key=row["lease_key"],
    )
    logger.warning(
        "jobs.attempt.refused",
        extra={
            **_fields(row),
            "outcome": str(Outcome.REFUSED),
            "error_code": error.code,
            "lease_key": row["lease_key"],
        },
    )
    if row["name"] in jobs:
        handle = jobs.get(row["name"])
        announce(handle, row, _decoded(handle, row), Outcome.REFUSED, error=error)


def _store_key(db: Database, handle: Declared, row: ClaimedJob, now: Any) -> Admission:
    """A keyed run whose row has no key: store it and hand the row back (once)."""
    definition = handle.definition
    kwargs = _decoded(handle, row)
    if kwargs is None:
        return Admission.RUN  # the executor fails it on the same decode, bodiless (J1)
    try:
        key = concurrency_key_of(definition, kwargs)
    except JobsError as exc:
        _fail(db, handle, row, kwargs, exc, now)
        return Admission.FAILED
    if key is None:  # not keyed after all
        return Admission.RUN
    try:
        db.run(
            QUERIES["job_key_store"],
            id=row["id"],
            lease_owner=row["lease_owner"],
            concurrency_key=keyed_lease_key(definition.name, key),
            now=now,
        )
    except QueryError as exc:  # the claim lapses and the row is claimed again
        logger.warning("jobs.concurrency.key-store-failed", extra={"error": str(exc)})
    logger.info("jobs.concurrency.key-stored", extra=_fields(row))
    return Admission.DEFERRED


def _fail(
    db: Database,
    handle: Declared,
    row: ClaimedJob,
    kwargs: dict[str, Any],
    exc: JobsError,
    now: Any,
) -> None:
    """``concurrency.key`` raised on a claimed run: fail it, body unrun, as the
    executor would (R2): the same decision, written here."""
    settler = Settler(db, now=lambda: now)
    verdict = decide(row, exc, handle.definition)
    logger.error("jobs.attempt.failed", extra={**_fields(row), "error": str(exc)[:500]})
    try:
        if not verdict.counted:  # issue 31: a refused connection is not the job's
            settler.hand_back(row, verdict.delay or 0.0)
        elif verdict.stop_reason is None:
            settler.retry(row, verdict.delay or 0.0, exc)
        elif settler.bury(
            row, state=verdict.state, error=exc, stop_reason=verdict.stop_reason
        ):
            announce(handle, row, kwargs, FAILED_OUTCOMES[verdict.state], error=exc)
    except QueryError as failure:  # the claim lapses and the row is claimed again
        logger.warning("jobs.settle.failed", extra={"error": str(failure)})
