"""Writing an attempt's outcome with the fenced statements of sql/jobs.sql (W3).

Every write matches ``id AND state = 'running' AND lease_owner``: a worker whose claim
another took, or whose job an operator cancelled, writes nothing, and the caller learns
it from the answer (False / None).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from ultimate_jobs.db import Database, Row
from ultimate_jobs.durable.reschedule import Reschedule
from ultimate_jobs.ground.exceptions import JobsError, QueryError, RunSuspended
from ultimate_jobs.runtime.parents import wake_parents_of
from ultimate_jobs.sql import QUERIES, Query
from ultimate_jobs.sql.rows import (
    JOB_BURY,
    JOB_COMPLETE,
    JOB_RELEASE,
    JOB_RETRY,
    Fence,
)

logger = logging.getLogger(__name__)
R = TypeVar("R")

MAX_ERROR_CHARS = 4096


def format_error(error: BaseException) -> str:
    """The stored last error: class, message and traceback, bounded to a few KB (R4)."""
    kind = type(error)
    try:
        head = f"{kind.__module__}.{kind.__qualname__}: {error}"
    except Exception:  # an error whose str() fails is still named by its class
        head = f"{kind.__module__}.{kind.__qualname__}"
    try:
        trace = "".join(traceback.format_exception(error))
    except Exception:  # even a MemoryError or a RecursionError is recorded (B4)
        trace = "(the traceback could not be formatted)"
    text = f"{head}\n\n{trace}"
    if len(text) <= MAX_ERROR_CHARS:
        return text
    keep = MAX_ERROR_CHARS - 40
    return text[: keep // 4] + "\n... (truncated) ...\n" + text[-(keep - keep // 4) :]


def error_code(error: BaseException) -> str:
    """The stable code of a library error; '' for any other exception."""
    return error.code if isinstance(error, JobsError) else ""


class Settler:
    """Writes the outcome of an attempt with the fenced statements of sql/jobs.sql.

    ``retry_for`` bounds how long a write is retried when the database is unreachable
    (W7): a settle that cannot land before the lease could lapse is given up, and the
    job is run again by whoever claims it next (at-least-once).

    ``alias`` is the alias ``db`` writes to: given, a completion or burial of a child
    whose parent lives on another alias wakes that parent there once it committed
    (S11, Q1, runtime/parents.py; best-effort).
    """

    def __init__(
        self,
        db: Database,
        *,
        now: Callable[[], Any] = lambda: None,
        retry_for: float = 0.0,
        stop: threading.Event | None = None,
        alias: str | None = None,
    ) -> None:
        self.db = db
        self.alias = alias
        self.now = now
        self.retry_for = retry_for
        self.stop = stop
        self.before_write: Callable[[], None] | None = None

    def before(self) -> None:
        """Tell the caller an outcome is about to be written (the worker then stops
        renewing and reporting the job, W4)."""
        if self.before_write is not None:
            self.before_write()

    def write(self, query: Query[R], **params: Any) -> list[R]:
        self.before()
        deadline = time.monotonic() + self.retry_for
        pause = 0.1
        while True:
            try:
                return self.db.run(query, now=self.now(), **params)
            except QueryError as exc:
                if time.monotonic() + pause > deadline:
                    raise
                logger.warning(
                    "jobs.settle.retrying",
                    extra={"query": query.name, "error": str(exc)},
                )
                if self.stop is not None and self.stop.wait(pause):
                    raise
                if self.stop is None:
                    time.sleep(pause)
                pause = min(pause * 2, 2.0)

    def complete(self, job: Fence, progress: str | None = None) -> bool:
        rows = self.write(
            JOB_COMPLETE,
            ids=[job["id"]],
            lease_owners=[job["lease_owner"]],
            progresses=[progress],
        )
        # S11, Q1: committed (each write is its own transaction): wake parents elsewhere
        wake_parents_of(self.db, self.alias, rows)
        return bool(rows)

    def retry(
        self,
        job: Fence,
        delay: float,
        error: BaseException,
        progress: str | None = None,
        *,
        last_error: str | None = None,
    ) -> datetime | None:
        rows = self.write(
            JOB_RETRY,
            id=job["id"],
            lease_owner=job["lease_owner"],
            delay=delay,
            last_error=last_error if last_error is not None else format_error(error),
            error_code=error_code(error),
            progress=progress,
        )
        return rows[0]["run_at"] if rows else None

    def bury(
        self,
        job: Fence,
        *,
        state: str,
        error: BaseException | None,
        stop_reason: str,
        last_error: str | None = None,
        code: str | None = None,
        uncount: bool = False,
        progress: str | None = None,
    ) -> bool:
        rows = self.write(
            JOB_BURY,
            id=job["id"],
            lease_owner=job["lease_owner"],
            state=state,
            last_error=last_error
            if last_error is not None
            else (format_error(error) if error else ""),
            error_code=code
            if code is not None
            else (error_code(error) if error else ""),
            stop_reason=stop_reason,
            uncount=uncount,
            progress=progress,
        )
        wake_parents_of(self.db, self.alias, rows)  # S11, Q1, as in complete
        return bool(rows)

    def release(self, job: Fence, *, uncount: bool) -> bool:
        rows = self.write(
            JOB_RELEASE, id=job["id"], lease_owner=job["lease_owner"], uncount=uncount
        )
        return bool(rows)

    def hand_back(self, job: Fence, delay: float) -> bool:
        """Give the row back untouched for a newer worker (P11), due in ``delay``."""
        rows = self.write(
            QUERIES["job_hand_back"],
            id=job["id"],
            lease_owner=job["lease_owner"],
            delay=delay,
        )
        return bool(rows)

    def suspend(
        self, job: Fence, suspension: RunSuspended, progress: str | None = None
    ) -> Row | None:
        """Park the job until its wake time, attempt not spent (S3, S4)."""
        rows = self.write(
            QUERIES["job_suspend"],
            id=job["id"],
            lease_owner=job["lease_owner"],
            step=suspension.step if suspension.waiting else None,
            wake_at=suspension.wake_at,
            poll=suspension.poll,
            progress=progress,
        )
        return rows[0] if rows else None

    def reschedule(
        self, job: Fence, stage: Reschedule, progress: str | None = None
    ) -> Row | None:
        """Queue the job's next stage with a fresh attempt budget (S5)."""
        rows = self.write(
            QUERIES["job_reschedule"],
            id=job["id"],
            lease_owner=job["lease_owner"],
            input=stage.input,
            delay=stage.delay,
            run_at=stage.run_at,
            progress=progress,
        )
        return rows[0] if rows else None
