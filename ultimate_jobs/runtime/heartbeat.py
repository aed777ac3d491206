"""The heartbeat: lease renewal, slot loss, the registry row and the drain request
(W4, W8, L1, L2, issue 15).

Every third of the lease it renews every held run's lease in one statement
(``job_heartbeat``), with the run's concurrency slots. A run that did not renew lost
its lease (another worker reclaimed it) or was cancelled by an operator: its token
says so, and the body stops at its next check. A capped run whose slot did not renew
lost its slot (``jobs.slot.lost``). It then writes the worker's registry row
(``worker_beat``), whose answer carries an operator's drain request. An idle worker
(nothing held, nothing changed since its last row) rewrites that row only when the
next beat would find it older than two thirds of the lease, every other beat by
default: the row still never comes within a third of the lease of its expiry (W8).
A worker's claim loop carries that idle rewrite in its poll's staging pass instead
(``carry``/``carried``): the poll refreshes the row before the beat would, so an idle
worker sends no statement of its own for it (N2, issue 26); the beat stays the
backstop, writing the row itself whenever a poll did not come in time. A drain
request reaches an idle worker with the refresh that carries it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import UTC, datetime

from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.ground.cancel import CANCELLED, LEASE_LOST
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.observability import metrics
from ultimate_jobs.observability.redaction import logged_correlation
from ultimate_jobs.runtime.held import Held, Ledger
from ultimate_jobs.runtime.lifecycle import FINISH, Lifecycle
from ultimate_jobs.sql import QUERIES, arrays
from ultimate_jobs.sql.rows import JOB_HEARTBEAT, Heartbeat, Staged

logger = logging.getLogger(__name__)

MAX_NAMES = 1000  # job names kept in a registry row; past it, none (issue 30)


class Beat:
    """One worker's heartbeat over its ledger (run ``loop`` in a thread)."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        worker_id: str,
        queues: list[str],
        slots: int,
        lease: float,
        every: float,
        lifecycle: Lifecycle,
        names: list[str] | None = None,
    ) -> None:
        self.ledger = ledger
        # The job names it claims, for its registry row (issue 30); None (not recorded)
        # past MAX_NAMES. Packed once: the statement writes them at the row's insert only.
        self.names = arrays.texts(names) if names and len(names) <= MAX_NAMES else None
        self.worker_id = worker_id
        self.queues = queues
        self.slots = slots
        self.lease = lease
        self.every = every
        self.lifecycle = lifecycle
        self.started_at = datetime.now(UTC)
        self.leases_lost = 0
        self.finished = threading.Event()  # the loop may exit
        self.now = threading.Event()  # beat now (set with finished too)
        # The last registry row written: when (monotonic clock) and what it listed.
        self._registered_at: float | None = None
        self._registered: tuple[tuple[object, ...], tuple[object, ...]] = ((), ())
        self._lock = threading.Lock()  # the claim loop carries the idle row too

    def loop(self, db: DirectDatabase) -> None:
        try:
            while not self.finished.is_set():
                self.run_once(db)
                self.now.wait(self.every)
                self.now.clear()
        finally:
            db.close()

    def stop(self) -> None:
        self.finished.set()
        self.now.set()

    def run_once(self, db: DirectDatabase) -> None:
        """Renew every held lease and the registry row; act on what did not renew."""
        held = self.ledger.unsettled()
        if held:
            try:
                rows = db.run(
                    JOB_HEARTBEAT,
                    ids=[e.row["id"] for e in held],
                    lease_owners=[e.row["lease_owner"] for e in held],
                    lease_seconds=self.lease,
                    now=None,
                )
            except QueryError as exc:
                logger.warning(
                    "jobs.heartbeat.failed",
                    extra={"worker_id": self.worker_id, "error": str(exc)},
                )
                self._expire_unrenewed(held)
            else:
                self._apply(held, rows)
        self._register(db)

    def _apply(self, held: list[Held], rows: list[Heartbeat]) -> None:
        now = time.monotonic()
        by_id = {e.row["id"]: e for e in held}
        for row in rows:
            entry = by_id[row["id"]]
            if row["renewed"]:
                entry.renewed_at = now
                if entry.row.get("lease_key") and not row["slots"]:
                    self._lose_slot(entry)
                continue
            if not self.ledger.live(entry):
                continue  # it finished meanwhile: never a lost lease
            if row["state"] == "cancelled":
                if entry.token.cancel(CANCELLED):
                    logger.warning(
                        "jobs.run.cancelled",
                        extra={
                            "job_id": str(row["id"]),
                            "job_name": entry.row["name"],
                            "correlation_id": logged_correlation(entry.row),
                        },
                    )
            else:
                self._lose(entry)

    def _expire_unrenewed(self, held: list[Held]) -> None:
        now = time.monotonic()
        for entry in held:
            if now - entry.renewed_at >= self.lease and not entry.settling:
                self._lose(entry)

    def _lose(self, entry: Held) -> None:
        if entry.token.cancel(LEASE_LOST):
            self.leases_lost += 1
            logger.error(
                "jobs.lease.lost",
                extra={
                    "job_id": str(entry.row["id"]),
                    "job_name": entry.row["name"],
                    "queue": entry.row["queue"],
                    "worker_id": self.worker_id,
                    "correlation_id": logged_correlation(entry.row),
                },
            )
            metrics.lease_lost(entry.row["queue"])

    def _lose_slot(self, entry: Held) -> None:
        """The run's concurrency slot was taken over after a late renewal (L1, L2)."""
        if not self.ledger.live(entry):
            return
        if entry.token.cancel(LEASE_LOST):
            logger.error(
                "jobs.slot.lost",
                extra={
                    "job_id": str(entry.row["id"]),
                    "job_name": entry.row["name"],
                    "lease_key": entry.row["lease_key"],
                    "worker_id": self.worker_id,
                },
            )

    def _idle_age(self) -> float:
        """How old the idle row may be when a beat finds it before the beat rewrites
        it: then the next beat would find it older than two thirds of the lease (a
        quarter beat of tolerance for a late wake-up)."""
        return self.lease * 2 / 3 - self.every * 3 / 4

    def _registration_due(
        self, listed: tuple[tuple[object, ...], tuple[object, ...]]
    ) -> bool:
        """Whether this beat writes the registry row: always while something is held
        or the row's lists changed; when idle, once it is ``_idle_age`` old."""
        with self._lock:
            if self._registered_at is None or listed != self._registered:
                return True
            age = time.monotonic() - self._registered_at
        return any(listed) or age > self._idle_age()

    def carry(self, horizon: float) -> str | None:
        """This worker's id when the claim loop's staging pass now should refresh the
        idle registry row (job_stage), else None: the row was written, lists nothing
        and nothing is held, and before the next poll (at most ``horizon`` seconds
        away) it would reach the age at which the beat rewrites it itself. So while
        polls come every ``horizon`` the beat never finds it due (W8, issue 26)."""
        with self._lock:
            if self._registered_at is None or any(self._registered):
                return None
            age = time.monotonic() - self._registered_at
        if age + horizon <= self._idle_age() or any(self._listed()):
            return None
        return self.worker_id

    def carried(self, written_at: float, answer: Staged) -> None:
        """What the staging pass that carried the row answered (``written_at``: the
        monotonic time before it was sent). A row it did not find (it expired and was
        deleted) is written whole by a beat at once."""
        registered, drain = answer["registered"], answer["drain"]
        with self._lock:
            if registered:
                if self._registered_at is None or written_at > self._registered_at:
                    self._registered_at = written_at
            else:
                self._registered_at = None
        if not registered:
            self.now.set()
        if drain:
            self._drain_requested()

    def _listed(self) -> tuple[tuple[object, ...], tuple[object, ...]]:
        """What the registry row lists now: in-flight and overrun job ids (≤100)."""
        return (tuple(self.ledger.ids()[:100]), tuple(self.ledger.overrun_ids()[:100]))

    def _drain_requested(self) -> None:
        if not self.lifecycle.stopping.is_set():
            # An operator's drain request (issue 15): finish what runs, claim nothing.
            logger.warning(
                "jobs.worker.drain-requested", extra={"worker_id": self.worker_id}
            )
            self.lifecycle.stop(FINISH)

    def _register(self, db: DirectDatabase) -> None:
        """The registry row (W8); its answer carries an operator's drain request."""
        overrun = self.ledger.overrun_ids()
        in_flight = self.ledger.ids()[:100]
        listed = (tuple(in_flight), tuple(overrun[:100]))
        if not self._registration_due(listed):
            return
        written_at = time.monotonic()
        try:
            rows = db.run(
                QUERIES["worker_beat"],
                id=self.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=self.started_at,
                queues=self.queues,
                names=self.names,
                slots=self.slots,
                in_flight=in_flight,
                abandoned=len(overrun),
                abandoned_jobs=overrun[:100],
                lease_seconds=self.lease,
                now=None,
            )
        except QueryError as exc:
            logger.warning(
                "jobs.worker.register-failed",
                extra={"worker_id": self.worker_id, "error": str(exc)},
            )
            return
        with self._lock:
            self._registered_at, self._registered = written_at, listed
        if rows and rows[0]["drain"]:
            self._drain_requested()

    def remove_registration(self, db: DirectDatabase) -> None:
        try:
            db.run(QUERIES["worker_remove"], id=self.worker_id)
        except QueryError:
            pass  # the row expires on its own
