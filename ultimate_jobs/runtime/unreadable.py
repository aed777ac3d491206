"""Claimed rows Python cannot read (B4): settled dead where they stand, never retried.

A job row written by hand or by an older version may hold a value Python cannot read
back (a ``created_at`` past year 9999, an input with an integer of thousands of
digits). The claim statement takes it like any other and stamps its lease; the one
door (db.py) answers the readable rows of the claim and keeps that one's raw text. Run
again, it would fail every claim until its lease lapsed and end as
LEASE_LAPSED_FINAL_ATTEMPT. Instead it is buried now, fenced on the token the claim
stamped: dead (failed for a ``dead_letter=False`` job) with ``X_ROW_UNREADABLE`` and
the reason, logged ``jobs.claim.unreadable`` with its id and counted in
``ultimate_jobs_rows_unreadable_total{table="job"}``. The other rows of the claim run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection

from ultimate_jobs.db import Unreadable
from ultimate_jobs.ground.exceptions import QueryError, RowUnreadable
from ultimate_jobs.observability import metrics
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql.rows import Fence

logger = logging.getLogger(__name__)


def bury_unreadable(
    settler: Settler, rows: list[Unreadable], *, dropped: Collection[str] = ()
) -> int:
    """Settle each unreadable claimed row; answer how many were buried now."""
    buried = 0
    for row in rows:
        values = row.values
        error = RowUnreadable("ultimate_jobs_job", row.id, row.error)
        ended = values.get("refused") == "t"
        logger.error(
            "jobs.claim.unreadable",
            extra={
                "job_id": row.id,
                "job_name": values.get("name"),
                "queue": values.get("queue"),
                "error": row.error[:300],
                "error_code": error.code,
            },
        )
        metrics.row_unreadable("job")
        owner = values.get("lease_owner")
        if ended or row.id is None or owner is None:
            continue  # the statement itself ended it (W5, L2): nothing left to settle
        fence = Fence(id=uuid.UUID(row.id), lease_owner=uuid.UUID(owner))
        state = "failed" if values.get("name") in dropped else "dead"
        try:
            landed = settler.bury(
                fence,
                state=state,
                error=None,
                last_error=str(error),
                code=error.code,
                stop_reason="terminal",
            )
        except QueryError as exc:
            logger.warning(
                "jobs.claim.unreadable-unsettled",
                extra={"job_id": row.id, "error": str(exc)},
            )
            continue
        buried += int(landed)
    return buried
