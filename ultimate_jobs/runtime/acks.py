"""Batched completions (N3): handler threads hand over, one thread writes many at once.

Every completion is a commit, and a commit waits for its WAL flush: one statement per
job caps a worker at a few hundred jobs a second on an ordinary disk. Here handler
threads ``add()`` a completed job and go on to the next one; one thread writes every
completion waiting with a single ``job_complete`` (array parameters), fenced per row on
its own claim token (W3): a stale token in a batch settles nothing for that row and
everything for the others.

Batching comes from concurrency, not from a timer: a write takes whatever arrived while
the previous one was in flight, so an idle worker writes a lone completion at once and a
busy one writes dozens per statement. ``window`` only bounds how long a completion can
wait when writes keep failing. A job's idempotency key is released when its completion
commits (J2). ``close()`` writes what is left (the worker's drain calls it). Once a
batch is written, each executor's completions in it are reported together
(``Finisher.completions``: one counter update per job name, N2).

Completions whose outcome somebody must hear about right after the row settles
(``on_settled``, ``job_settled`` receivers, a concurrency slot to free) are not batched:
the executor writes those itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ultimate_jobs.db import Database, hot_door
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.runtime.parents import wake_parents_of
from ultimate_jobs.sql import arrays
from ultimate_jobs.sql.rows import JOB_COMPLETE, Fence, Settled

logger = logging.getLogger(__name__)

MAX_BATCH = 500


class Reporter(Protocol):
    """Reports a batch of written completions (``Finisher.completions``)."""

    def completions(
        self, batch: Sequence[Pending], landed: Collection[Any]
    ) -> None: ...


@dataclass(slots=True)
class Pending:
    """One completed job waiting to be written (never changed once made: not frozen
    only because a frozen dataclass's ``__init__`` costs 0.53 µs against 0.12, N2)."""

    job: Fence
    progress: str | None
    then: Callable[[bool], object] | None  # told whether the fenced write landed
    # Or, for an executor's completion: the finisher that reports it with the rest of
    # its batch (one metric update per job name, N2), and the attempt's duration.
    finisher: Reporter | None = None
    duration: float = 0.0


class Acks:
    """The batching writer of completions for one worker process."""

    def __init__(
        self,
        db: Database,
        *,
        window: float = 0.05,
        retry_for: float = 30.0,
        now: Callable[[], Any] = lambda: None,
        start: bool = True,
        alias: str | None = None,
    ) -> None:
        self.db = db
        # S11, Q1: the alias ``db`` writes to; given, a batch that completed children
        # of a parent on another alias wakes it there (runtime/parents.py).
        self.alias = alias
        self._hot = hot_door(db)  # below the cursor on a DirectDatabase (db.py)
        self.window = window
        self.retry_for = retry_for
        self.now = now
        self.batches = 0  # statements written, for tests and stats
        self._pending: list[Pending] = []
        # A plain lock, entered in C by ``add`` (a Condition's ``with`` is two Python
        # calls per job, N2); the condition on it wakes the writer, and only when it
        # waits (``_waiting``): a busy writer takes the next batch without a wake.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting = False
        self._closing = False
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name="jobs-acks", daemon=True)
        if start:
            self.start()

    def start(self) -> None:
        """Start writing (``start=False`` lets a test queue a batch first)."""
        self._thread.start()

    def add(
        self,
        job: Fence,
        progress: str | None = None,
        then: Callable[[bool], object] | None = None,
        *,
        finisher: Reporter | None = None,
        duration: float = 0.0,
    ) -> bool:
        """Queue one completion; ``then(landed)`` is called once it is written, or
        ``finisher`` reports it (``Finisher.completions``) with the rest of its batch.

        Answers False after ``close()``: the caller writes the completion itself.
        """
        pending = Pending(job, progress, then, finisher, duration)
        with self._lock:
            if self._closing:
                return False
            self._pending.append(pending)
            if self._waiting:  # the writer is idle (``_idle`` set): wake it
                self._waiting = False
                self._idle.clear()
                self._changed.notify()
        return True

    def close(self, timeout: float = 30.0) -> bool:
        """Write what is pending and stop; answers False if it could not in time."""
        with self._lock:
            self._closing = True
            self._changed.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every completion added so far is written (tests)."""
        return self._idle.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._idle.set()
                    self._waiting = True
                    self._changed.wait()
                self._waiting = False
                if not self._pending and self._closing:
                    self._idle.set()
                    return
                batch, self._pending = (
                    self._pending[:MAX_BATCH],
                    self._pending[MAX_BATCH:],
                )
            self._write(batch)

    def _write(self, batch: list[Pending]) -> None:
        deadline = time.monotonic() + self.retry_for
        pause = min(0.05, self.window)
        while True:
            try:
                rows: list[Settled] = self._hot(
                    JOB_COMPLETE,
                    # Binary arrays (sql/arrays.py): psycopg's list dumper was
                    # a tenth of a busy worker's Python time.
                    ids=arrays.uuids([p.job["id"] for p in batch]),
                    lease_owners=arrays.uuids([p.job["lease_owner"] for p in batch]),
                    progresses=arrays.jsonbs([p.progress for p in batch]),
                    now=self.now(),
                )
                break
            except QueryError as exc:
                if time.monotonic() + pause > deadline:
                    logger.error(
                        "jobs.acks.failed",
                        extra={"jobs": len(batch), "error": str(exc)},
                    )
                    rows = []
                    break
                logger.warning(
                    "jobs.settle.retrying",
                    extra={"query": "job_complete", "error": str(exc)},
                )
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
        self.batches += 1
        landed = {row["id"] for row in rows}
        reported: dict[Reporter, list[Pending]] = {}
        for pending in batch:
            if pending.finisher is not None:
                reported.setdefault(pending.finisher, []).append(pending)
            elif pending.then is not None:
                try:
                    pending.then(pending.job["id"] in landed)
                except Exception:
                    logger.exception(
                        "jobs.acks.callback-failed",
                        extra={"job_id": str(pending.job["id"])},
                    )
        # N2: each executor's completions reported at once (one counter update per
        # job name), never the write's concern.
        for finisher, done in reported.items():
            try:
                finisher.completions(done, landed)
            except Exception:
                logger.exception("jobs.acks.callback-failed", extra={"jobs": len(done)})
        # S11, Q1: the batch committed; wake parents on another alias (best-effort).
        wake_parents_of(self.db, self.alias, rows)
