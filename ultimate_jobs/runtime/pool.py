"""The pool: the handler threads that run held jobs, and the drain (W6, W9, S6).

``concurrency`` handler threads take held runs from one queue in claim order (a
handler that finishes takes the next waiting, prefetched row at once, without a wake
from the claim loop) and execute them (executor.py) through ``POOL_SIZE``
database connections they share. A run leaves the ledger when its handler is done
with it, whatever happened: its slot comes free and the claim loop hears of it.
Nothing but the worker's own stop ends a handler thread (W9). The drain (W6) first
hands back the prefetched runs no handler started, their attempt NOT counted (they
never ran), then waits DRAIN_TIMEOUT for the started ones to finish and hands the
rest back to the queue with their attempt counted.
"""

from __future__ import annotations

import functools
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable, Sequence

from ultimate_jobs.db import DatabasePool, DirectDatabase
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.ground.cancel import CANCELLED, DRAINING, LEASE_LOST
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.limits.slots import release_slots
from ultimate_jobs.observability.redaction import logged_correlation
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.executor import Executor
from ultimate_jobs.runtime.held import Held, Ledger
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)

# At exit, how long the handler threads get to finish their last writes before the
# pool they share closes (seconds).
HANDLER_GRACE = 2.0


class Pool:
    """Handler threads over one ledger; ``submit`` hands a claimed run to them."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        alias: str,
        jobs: Registry,
        concurrency: int,
        size: int,
        worker_id: str,
        lease: float,
        lifecycle: Lifecycle,
        tally: dict[str, int],
        on_overrun: Callable[[], None],
        on_due: Callable[[float], object],
        on_freed: Callable[[ClaimedJob], None],
    ) -> None:
        self.ledger = ledger
        self.alias = alias
        self.jobs = jobs
        self.concurrency = concurrency
        self.lease = lease
        self.lifecycle = lifecycle
        self.tally = tally  # outcomes by name, for logs and tests
        self.on_overrun = on_overrun  # a deadline passed with the body still running
        self.on_due = on_due  # a retry or sleep this run parked comes due in N s
        self.on_freed = on_freed  # a run left the ledger: its slot is free
        self.connections = DatabasePool(
            alias,
            size=min(size, concurrency),
            application_name=f"ultimate_jobs pool {worker_id}"[:63],
        )
        # The held runs in claim order: a handler that finishes takes the next one
        # at once (a C queue: no wake unless it waited for one).
        self._work: queue_module.SimpleQueue[Held | None] = queue_module.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def open(self) -> None:
        """Dial the shared connections."""
        # Every connection of the process is dialled at its start, so it holds the
        # documented number from then on (docs/scaling.md); a failed dial is retried
        # by the first statement that needs the connection.
        self.connections.open()

    def spawn(self, acks: Acks) -> None:
        """Start the handler threads; their completions go through ``acks`` (N3)."""
        for index in range(self.concurrency):
            thread = threading.Thread(
                target=functools.partial(self._handle_loop, acks),
                name=f"jobs-handler-{index}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, row: ClaimedJob) -> None:
        self.submit_all((row,))

    def submit_all(self, rows: Sequence[ClaimedJob], slots: int | None = None) -> None:
        """Hold a claim's rows in one step and queue them for the handler threads; the
        rows past the first ``slots`` were prefetched (``Held.extra``)."""
        put = self._work.put
        for entry in self.ledger.add_all(rows, slots):
            put(entry)

    def close(self) -> None:
        """Let the handlers finish, then close the shared connections."""
        for _ in self._threads:
            self._work.put(None)
        # A handler that just settled may still be releasing its slot (L1): the pool
        # closes once the handlers are done, or after a short grace (a body the drain
        # abandoned may never end; its writes are fenced anyway), or at once after a
        # second signal.
        abandoning = self.lifecycle.abandoning.is_set()
        grace = time.monotonic() + (0.0 if abandoning else HANDLER_GRACE)
        for thread in self._threads:
            thread.join(max(0.0, grace - time.monotonic()))
        self.connections.close()

    # -- running -----------------------------------------------------------------

    def _handle_loop(self, acks: Acks) -> None:
        pool = self.connections
        stop = self.lifecycle.abandoning
        executor = Executor(
            Settler(pool, retry_for=self.lease, stop=stop, alias=self.alias),
            alias=self.alias,
            jobs=self.jobs,
            manage_connections=True,
            acks=acks,
            # The executor closes a deadline settler's database when done with it.
            deadline_settler=lambda: Settler(
                pool.shared(), retry_for=self.lease, stop=stop, alias=self.alias
            ),
        )
        take, start = self._work.get, self.ledger.start
        while (entry := take()) is not None:
            if start(entry):  # never after a drain began (W6): the drain hands it back
                self._run_one(executor, entry)

    def _run_one(self, executor: Executor, entry: Held) -> None:
        started = time.monotonic()
        token = entry.token
        if token.is_set() and token.reason in (LEASE_LOST, CANCELLED):
            # It waited prefetched and the row is no longer ours (the heartbeat lost
            # its lease, or an operator cancelled it): its body never starts.
            logger.warning(
                "jobs.settle.unowned",
                extra={"job_id": str(entry.row["id"]), "reason": token.reason},
            )
            self.ledger.remove(entry)
            self.on_freed(entry.row)
            return

        def overrun() -> None:
            self.ledger.overran(entry)
            self.on_overrun()  # report the lost slot now, not a beat later

        try:
            attempt = executor.execute(
                entry.row,
                entry.token,
                before_settle=functools.partial(self.ledger.settling, entry),
                on_overrun=overrun,
            )
            if attempt.due_in is not None and attempt.landed:
                self.on_due(attempt.due_in)
            outcome = str(attempt.outcome)
            self.tally[outcome] = self.tally.get(outcome, 0) + 1
        except BaseException as exc:
            # Nothing may end a handler thread but the worker's own stop (W9): its slot
            # would be lost for good. Signals only ever reach the main thread, so a
            # BaseException here came from code that ran in this thread.
            self._crashed(executor, entry, exc, started)
        finally:
            self.ledger.remove(entry)
            # A freed concurrency slot wakes the queue's workers, this one too (L1).
            release_slots(executor.settler.db, entry.row)
            self.on_freed(entry.row)

    def _crashed(
        self, executor: Executor, entry: Held, error: BaseException, started: float
    ) -> None:
        """The attempt broke outside its body. Unless the database is the trouble (the
        lease then hands the row to the next claim), the real error settles it now."""
        logger.error(
            "jobs.attempt.crashed",
            extra={
                "job_id": str(entry.row["id"]),
                "job_name": entry.row["name"],
                "error": type(error).__name__,
                "correlation_id": logged_correlation(entry.row),
            },
        )
        if isinstance(error, QueryError):
            return
        try:
            executor.crashed(entry.row, entry.token, error, started)
        except Exception as exc:
            logger.error(
                "jobs.attempt.crash-unrecorded",
                extra={"job_id": str(entry.row["id"]), "error": type(exc).__name__},
            )

    # -- stopping ----------------------------------------------------------------

    def cancel_all(self) -> None:
        """A drain began: every held run's token says DRAINING (W6)."""
        for entry in self.ledger.entries():
            entry.token.cancel(DRAINING)

    def drain(
        self, db: DirectDatabase, timeout: float, worker_id: str, *, withhold: bool
    ) -> int:
        """Hand back at once the prefetched runs no handler started (``withhold``: a
        drain, not --max-jobs), attempt not counted; wait ``timeout`` for the held runs
        to end; hand the rest back to the queue, the started ones with their attempt
        counted (W6). Answers how many were handed back counted."""
        if withhold:
            self._hand_back_waiting(db, worker_id)
        left = self.ledger.wait_empty(
            time.monotonic() + timeout, self.lifecycle.abandoning
        )
        # What no handler started by the deadline (--max-jobs' prefetched runs too).
        self._hand_back_waiting(db, worker_id, everything=True)
        left = [entry for entry in left if entry.started]
        if not left:
            return 0
        logger.error(
            "jobs.worker.drain-abandoned",
            extra={"worker_id": worker_id, "job_ids": [str(e.row["id"]) for e in left]},
        )
        settler = Settler(db)
        released = 0
        for entry in left:
            entry.token.cancel(DRAINING)
            try:
                settler.release(entry.row, uncount=False)  # the attempt is counted
                released += 1
            except QueryError as exc:
                logger.error(
                    "jobs.worker.release-failed",
                    extra={"job_id": str(entry.row["id"]), "error": str(exc)},
                )
        return released

    def _hand_back_waiting(
        self, db: DirectDatabase, worker_id: str, *, everything: bool = False
    ) -> None:
        """W6: the prefetched runs no handler started go back to the queue at once,
        claimable by the next worker, their attempt NOT counted (their body never ran);
        one that cannot be written comes back when its lease lapses (W5)."""
        waiting = self.ledger.withdraw(everything=everything)
        if not waiting:
            return
        settler = Settler(db)
        returned = 0
        for entry in waiting:
            entry.token.cancel(DRAINING)
            try:
                returned += settler.release(entry.row, uncount=True)
            except QueryError as exc:
                logger.error(
                    "jobs.worker.release-failed",
                    extra={"job_id": str(entry.row["id"]), "error": str(exc)},
                )
            release_slots(db, entry.row)  # a capped row's slot (L1), if it had one
            self.on_freed(entry.row)
        logger.info(
            "jobs.worker.prefetch-returned",
            extra={"worker_id": worker_id, "jobs": returned, "held": len(waiting)},
        )
