"""Writing and reading the log lines an attempt kept (seed ``logMaxEntries``).

The body's ``run.logger`` fills a bounded in-memory buffer (declaration/runlog.py);
``write`` stores it in ONE statement (``run_log_write``) when the attempt ends, and only
when it holds a line. The hot path pays nothing for an attempt that logs nothing and
one INSERT for one that does, however many lines it wrote; a failed write is logged
(``jobs.run-log.failed``) and never fails the attempt.

Lines are redacted by ``run.logger`` when they are written (declaration/runlog.py, B5):
the buffer never holds an input's redacted value.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from ultimate_jobs.db import Database
from ultimate_jobs.declaration.runlog import RunLogBuffer, bounded
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.sql import QUERIES

logger = logging.getLogger(__name__)


def write(
    db: Database,
    *,
    job_id: uuid.UUID,
    run_id: uuid.UUID,
    attempt: int,
    buffer: RunLogBuffer | None,
    now: Any = None,
) -> bool:
    """Store an attempt's kept lines in one statement; answers whether it wrote."""
    if buffer is None or (not len(buffer) and not buffer.dropped):
        return False
    entries = [
        {
            **line,
            "message": bounded(line["message"]),
        }
        for line in buffer.lines()
    ]
    try:
        db.run(
            QUERIES["run_log_write"],
            job_id=job_id,
            run_id=run_id,
            attempt=attempt,
            entries=json.dumps(entries, default=str),
            dropped=buffer.dropped,
            now=now,
        )
    except QueryError as exc:
        logger.warning(
            "jobs.run-log.failed",
            extra={"job_id": str(job_id), "attempt": attempt, "error": str(exc)},
        )
        return False
    return True


def as_json(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """RunLog rows as ``jobs show --json`` answers them: one object per attempt that
    logged, oldest first: ``{"run_id", "attempt", "dropped", "entries": [{"at",
    "level", "message"}]}``."""
    return [
        {
            "run_id": str(row.run_id),
            "attempt": row.attempt,
            "dropped": row.dropped,
            "entries": list(row.entries or []),
        }
        for row in rows
    ]
