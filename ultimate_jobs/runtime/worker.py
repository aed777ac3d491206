"""The worker: claim, run, settle, heartbeat, drain (W1-W9).

Threads, each with its own database connection (``DirectDatabase``):

* the claim loop (the caller's thread): one statement takes at most as many rows as
  there are free slots (W2), so a backlog never becomes an unbounded fan-out: the plain
  claim for declared jobs without a fleet cap, the limited claim for capped ones (or
  all, under a budget), and only names this deploy declares. Due delayed rows and
  lapsed leases reach 'ready' through a staging pass (W5) at most once per poll
  interval and at every wake; while idle that pass is the one statement of a poll. It sleeps
  on an event that a finishing job sets when the worker was full (a slot coming free
  claims at once) and that the poll interval times out; while idle the interval
  doubles up to IDLE_POLL_MAX.
* ``concurrency`` handler threads run the bodies and write their outcomes, through a
  pool of ``POOL_SIZE`` connections they share (at most ``concurrency``).
* the heartbeat thread renews every held lease in one statement every third of the
  lease (W4) and keeps the worker's registry row fresh (W8).
* a wake timer (timers.py) for retries and sleeps this worker parked that come due
  within a minute: they are claimed on time, not at the next poll (S3).
* a deadline (S6) fails its attempt at once, through the pool (not the handler thread,
  which the body may still hold).

Every write about a job is fenced on the claim token the claim stamped (W3). Stopping
comes through the process's Lifecycle (lifecycle.py): the first SIGTERM/SIGINT starts a
drain (W6): claiming stops at once, every held run's token is set with DRAINING, and
in-flight bodies get DRAIN_TIMEOUT to finish; the rest are handed back to the queue
with their attempt counted. A second signal ends the drain at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue as queue_module
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import DatabasePool, DirectDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.declaration.run import CANCELLED, DRAINING, LEASE_LOST, CancelToken
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.limits.budgets import Budget, Limits, claim_parameters, fleet_caps
from ultimate_jobs.limits.slots import release_slots
from ultimate_jobs.observability import metrics
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.admission import Admission, admit
from ultimate_jobs.runtime.executor import Executor
from ultimate_jobs.runtime.lifecycle import DRAIN, FINISH, Lifecycle
from ultimate_jobs.runtime.outcomes import Outcome, announce
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.runtime.share import SlotShare
from ultimate_jobs.runtime.timers import WakeTimer
from ultimate_jobs.runtime.unreadable import bury_unreadable
from ultimate_jobs.runtime.wake import QUEUE_CHANNEL, Wake
from ultimate_jobs.sql import QUERIES, Query, arrays
from ultimate_jobs.sql.rows import (
    JOB_CLAIM,
    JOB_CLAIM_PLAIN,
    JOB_HEARTBEAT,
    JOB_STAGE,
    ClaimedJob,
    Heartbeat,
    Staged,
)

logger = logging.getLogger(__name__)

# While saturated, how long a freed slot waits for others before the claim (seconds).
GATHER = 0.002
# After a claim that left slots free, when to look again for rows whose wake N1's
# throttle held back (seconds): bounds such a row's wait to this, not a poll.
RELOOK = 0.02
# The most rows one staging pass (job_stage) makes ready; a full pass stages again.
STAGE_BATCH = 500
MAX_WORKER_ID = 200  # the registry's id column and the job rows' worker_id
# At exit, how long the handler threads get to finish their last writes before the
# pool they share closes (seconds).
HANDLER_GRACE = 2.0


@dataclass(eq=False)
class Held:
    """A job this worker claimed and has not settled yet."""

    row: ClaimedJob
    token: CancelToken = field(default_factory=CancelToken)
    # When the last renewal landed (monotonic clock).
    renewed_at: float = field(default_factory=time.monotonic)
    settling: bool = False  # the body ended; its outcome is being written
    # Failed at its deadline while the body runs on, ignoring its token (S6): its
    # handler thread is lost capacity until the body returns.
    overrun: bool = False


@dataclass
class WorkerStats:
    """What this worker did, by outcome; for logs and tests."""

    claimed: int = 0
    abandoned: int = 0
    leases_lost: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


class Worker:
    """One worker: a claim loop, handler threads and a heartbeat."""

    name = "worker"

    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        worker_id: str | None = None,
        max_jobs: int | None = None,
        settings: JobsSettings | None = None,
        jobs: Registry = registry,
        lifecycle: Lifecycle | None = None,
        wake: Wake | None = None,
        limits: Limits | None = None,
        alias: str | None = None,
        share: SlotShare | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        # Q1: the alias whose queues this worker claims (DATABASE unless a process
        # serves several, runtime/share.py), and the slots its claim loops share.
        self.alias = alias or self.settings.DATABASE
        self.share = share
        self.jobs = jobs
        self.lifecycle = lifecycle or Lifecycle()
        self.notifications = wake
        self.queues = list(
            queues or self.settings.QUEUES or jobs.queues() or ["default"]
        )
        self.concurrency = concurrency or self.settings.CONCURRENCY
        if worker_id is not None:
            # B4: an id past the column would start a worker whose every claim fails.
            check_text(
                worker_id, field="worker_id", max_length=MAX_WORKER_ID, empty=False
            )
        self.worker_id = worker_id or (
            f"{socket.gethostname()[: MAX_WORKER_ID - 20]}:{os.getpid()}:"
            f"{uuid.uuid4().hex[:6]}"
        )
        self.stats = WorkerStats()
        self.budget = Budget(limits)  # per-process budgets (L3); fleet caps are in SQL
        self.started_at = datetime.now(UTC)
        self._held: dict[uuid.UUID, Held] = {}
        self._lock = threading.Lock()
        self._idle_changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._finished = threading.Event()  # every thread may exit
        self._wake_heartbeat = threading.Event()  # beat now (set with _finished too)
        self._work: queue_module.SimpleQueue[Held | None] = queue_module.SimpleQueue()
        self._saturated = False
        self._claims_left = max_jobs
        self._timer = WakeTimer(
            self._wake_to_stage
        )  # retries/sleeps due within a minute
        # The plain claim (job_claim_plain) serves the declared names without a fleet
        # cap; the limited claim (job_claim) the capped ones, and every name once a
        # budget is set (L1-L3). Due delayed rows and lapsed leases reach 'ready'
        # through a staging pass at most once per poll interval, or when a local
        # timer says a row came due.
        capped = set(fleet_caps(jobs)["cap_names"])
        names = sorted(handle.name for handle in jobs)
        if self.budget.limits.bounded:
            capped = set(names)
        self._plain_names = [name for name in names if name not in capped]
        self._limited_names = [name for name in names if name in capped]
        # The plain claim's and the staging pass's array parameters never change:
        # packed once (sql/arrays.py), not dumped element by element per statement.
        self._packed_queues = arrays.texts(self.queues)
        self._packed_plain_names = arrays.texts(self._plain_names)
        self._packed_names = arrays.texts(names)
        self._dropped = [h.name for h in jobs if not h.definition.dead_letter]
        self._staged_at = float("-inf")
        self._stage_now = False
        self._acks: Acks | None = None  # batched completions (N3), made in run()
        self.lifecycle.on_stop(self._on_stop)
        self.lifecycle.on_abandon(self._on_abandon)

    # -- public ------------------------------------------------------------------

    def run(self) -> int:
        """Serve until the lifecycle stops (a signal, stop(), or --max-jobs)."""
        logger.info(
            "jobs.worker.started",
            extra={
                "worker_id": self.worker_id,
                "queues": self.queues,
                "concurrency": self.concurrency,
                "alias": self.alias,
            },
        )
        if self.share is not None:
            self.share.on_free(self.wake)
        if self.notifications is not None:
            self.notifications.subscribe(QUEUE_CHANNEL, self._on_notification)
            self.notifications.start()
        acks_db = self._database("acks")
        self._acks = Acks(acks_db, retry_for=self.settings.LEASE)
        pool = DatabasePool(
            self.alias,
            size=min(self.settings.POOL_SIZE, self.concurrency),
            application_name=f"ultimate_jobs pool {self.worker_id}"[:63],
        )
        # Every connection of the process is dialled at its start, so it holds the
        # documented number from then on (docs/scaling.md); a failed dial is retried
        # by the first statement that needs the connection.
        pool.open()
        with contextlib.suppress(QueryError):
            acks_db.connect()
        handlers = [
            self._spawn(
                functools.partial(self._handle_loop, pool), f"jobs-handler-{index}"
            )
            for index in range(self.concurrency)
        ]
        self._spawn(self._heartbeat_loop, "jobs-heartbeat")
        db = self._database("worker")
        try:
            self._claim_loop(db)
            self._drain(db)
        finally:
            # Completions handed over before the drain ended are written first.
            self._acks.close(timeout=self.settings.LEASE)
            acks_db.close()
            self._finished.set()
            self._wake_heartbeat.set()
            self._timer.stop()
            for _ in range(self.concurrency):
                self._work.put(None)
            # A handler that just settled may still be releasing its slot (L1): the
            # pool closes once the handlers are done, or after a short grace (a body
            # the drain abandoned may never end; its writes are fenced anyway), or at
            # once after a second signal.
            abandoning = self.lifecycle.abandoning.is_set()
            grace = time.monotonic() + (0.0 if abandoning else HANDLER_GRACE)
            for thread in handlers:
                thread.join(max(0.0, grace - time.monotonic()))
            pool.close()
            self._remove_registration(db)
            db.close()
            logger.info(
                "jobs.worker.stopped",
                extra={"worker_id": self.worker_id, **self.stats.outcomes},
            )
        return 0

    def stop(self) -> None:
        """Begin a drain: stop claiming and set every held run's token (DRAINING)."""
        self.lifecycle.stop(DRAIN)

    def wake(self) -> None:
        """Claim now rather than at the next poll (a notification, a local timer)."""
        self._wake.set()

    def _on_notification(self, queue: str) -> None:
        if queue in self.queues:
            # A wake may be for a row not ready yet (a resumed wait, a promotion): the
            # staging pass runs first; it also says whether the claim has work (N1).
            self._stage_now = True
            self.wake()

    def _wake_to_stage(self) -> None:
        self._stage_now = True
        self.wake()

    def idle_ceiling(self) -> float:
        """The idle poll ceiling: longer once the LISTEN wake is proven (N1)."""
        if self.notifications is not None and self.notifications.proven.is_set():
            return self.settings.WOKEN_IDLE_POLL_MAX
        return self.settings.IDLE_POLL_MAX

    def held_ids(self) -> list[uuid.UUID]:
        with self._lock:
            return list(self._held)

    # -- claiming ----------------------------------------------------------------

    def _claim_loop(self, db: DirectDatabase) -> None:
        poll = self.settings.POLL_INTERVAL
        idle = poll
        failures = 0
        gather = min(GATHER, poll)
        slots = self.concurrency
        while not self.lifecycle.stopping.is_set():
            free = self._free_slots()
            if free <= 0:
                self._wait(poll)
                continue
            if self._saturated and free < min(max(2, self.concurrency // 4), slots):
                # Busy: let a few more slots come free so one claim fills them (N3),
                # rather than one claim statement per finished job. With one slot no
                # other can come free: waiting would only stall every claim.
                self.lifecycle.wait(gather)
                free = self._free_slots()
            taken = free if self.share is None else self.share.take(free)
            if taken <= 0:
                self._wait(poll)  # the other aliases' loops hold every slot
                continue
            claimed = 0
            try:
                claimed = self._claim(db, taken)
            except QueryError as exc:
                failures += 1
                pause = min(0.25 * 2 ** min(failures, 4), 5.0)
                logger.warning(
                    "jobs.claim.failed",
                    extra={
                        "worker_id": self.worker_id,
                        "error": str(exc),
                        "retry_in": pause,
                    },
                )
                self.lifecycle.wait(pause)
                continue
            finally:
                if self.share is not None:
                    self.share.give(taken - claimed, wake=False)  # left unfilled
            if failures:
                logger.info("jobs.db.reconnected", extra={"worker_id": self.worker_id})
                failures = 0
            # Under a budget a finishing run may make room: it wakes the loop (L3).
            self._saturated = claimed >= free or self.budget.limits.bounded
            if claimed:
                idle = poll
                if not self._saturated:
                    # N1's enqueue throttle keeps a queue's wake silent while a row of
                    # it is still ready: a row committed while this claim ran may be
                    # announced by nobody. One staging pass RELOOK later finds it.
                    self._stage_now = True
                    self._wait(min(RELOOK, poll))
            else:
                self._wait(min(idle, self.budget.retry_in() or idle))
                idle = min(idle * 2, self.idle_ceiling())

    def _wait(self, seconds: float) -> None:
        if self._wake.wait(seconds):
            self._wake.clear()

    def _free_slots(self) -> int:
        with self._lock:
            free = self.budget.free(self.concurrency, self._held_rows())
        if self._claims_left is not None:
            if self._claims_left <= 0:
                self.lifecycle.stop(FINISH)
            free = min(free, self._claims_left)
        return free

    def _held_rows(self) -> list[ClaimedJob]:
        return [entry.row for entry in self._held.values()]

    def _claim(self, db: DirectDatabase, limit: int) -> int:
        with self._lock:
            held = self._held_rows()
        started = time.monotonic()
        if not self._staged_or_due(db):
            return 0  # nothing due, nothing ready: the idle poll was one statement
        rows = self._claim_plain(db, limit)
        if self._limited_names and len(rows) < limit:
            rows += self._claimed_rows(
                db,
                JOB_CLAIM,
                queues=self.queues,
                limit=limit - len(rows),
                worker_id=self.worker_id,
                lease_seconds=self.settings.LEASE,
                dropped=self._dropped,
                names=self._limited_names,
                now=None,
                **claim_parameters(
                    self.jobs, self.budget, queues=self.queues, held=held
                ),
            )
        metrics.claim_finished(time.monotonic() - started)
        claimed = 0
        for row in rows:
            if row["buried"]:
                self._announce_exhausted(row)
                continue
            admission = admit(db, self.jobs, row)
            if admission is not Admission.RUN:
                outcome = str(admission)
                self.stats.outcomes[outcome] = self.stats.outcomes.get(outcome, 0) + 1
                continue
            self.budget.started([row])
            entry = Held(row)
            with self._lock:
                self._held[row["id"]] = entry
            claimed += 1
            self._work.put(entry)
        self.stats.claimed += claimed
        if self._claims_left is not None:
            self._claims_left -= claimed
        return claimed

    def _staged_or_due(self, db: DirectDatabase) -> bool:
        """Run the staging pass when it is due; answer whether a claim may find work.
        An idle poll is one statement (the pass says whether ready work waits) and a
        busy worker stages once per poll interval (W2, W5)."""
        now = time.monotonic()
        if not self._stage_now and now - self._staged_at < self.settings.POLL_INTERVAL:
            return True
        self._stage_now = False
        self._staged_at = now
        staged, ready = self._stage(db)
        if staged >= STAGE_BATCH:
            self._stage_now = True  # more are due: stage again next round
        return bool(staged or ready)

    def _claim_plain(self, db: DirectDatabase, limit: int) -> list[ClaimedJob]:
        if not self._plain_names:
            return []
        return self._claimed_rows(
            db,
            JOB_CLAIM_PLAIN,
            queues=self._packed_queues,
            limit=limit,
            worker_id=self.worker_id,
            lease_seconds=self.settings.LEASE,
            names=self._packed_plain_names,
            now=None,
        )

    def _claimed_rows(
        self, db: DirectDatabase, query: Query[ClaimedJob], **params: Any
    ) -> list[ClaimedJob]:
        """One claim statement's rows; those Python cannot read are settled at once,
        never retried (B4), before the next statement on ``db`` forgets them."""
        rows = db.run(query, **params)
        if db.unreadable:
            bury_unreadable(Settler(db), db.unreadable, dropped=self._dropped)
        return rows

    def _stage(self, db: DirectDatabase) -> tuple[int, bool]:
        """One staging pass (job_stage): due delayed rows and lapsed leases made ready,
        lapsed final attempts buried and announced (W5)."""
        rows = db.run(
            JOB_STAGE,
            queues=self._packed_queues,
            limit=STAGE_BATCH,
            dropped=self._dropped,
            names=self._packed_names,
            now=None,
        )
        if db.unreadable:
            bury_unreadable(Settler(db), db.unreadable, dropped=self._dropped)
        if not rows:
            return 0, False
        for row in rows:
            if row["id"] is not None:
                self._announce_exhausted(_buried(row))
        return rows[0]["staged"], rows[0]["ready"]

    def _announce_exhausted(self, row: ClaimedJob) -> None:
        """W5: a lapsed lease on the final attempt was buried by the claim itself."""
        logger.error(
            "jobs.claim.exhausted",
            extra={
                "job_id": str(row["id"]),
                "job_name": row["name"],
                "attempt": row["attempt"],
                "error": "LEASE_LAPSED_FINAL_ATTEMPT",
                "correlation_id": row["correlation_id"],
            },
        )
        metrics.job_buried(row, jobs=self.jobs)
        if row["name"] in self.jobs:
            dead = row["state"] == "dead"
            outcome = Outcome.DEAD_LETTERED if dead else Outcome.DROPPED
            announce(self.jobs.get(row["name"]), row, None, outcome)

    # -- running -----------------------------------------------------------------

    def _handle_loop(self, pool: DatabasePool) -> None:
        settler = Settler(
            pool, retry_for=self.settings.LEASE, stop=self.lifecycle.abandoning
        )
        executor = Executor(
            settler,
            alias=self.alias,
            jobs=self.jobs,
            manage_connections=True,
            acks=self._acks,
            # The executor closes a deadline settler's database when done with it.
            deadline_settler=lambda: Settler(
                pool.shared(),
                retry_for=self.settings.LEASE,
                stop=self.lifecycle.abandoning,
            ),
        )
        while True:
            entry = self._work.get()
            if entry is None:
                return
            self._run_one(executor, entry)

    def _run_one(self, executor: Executor, entry: Held) -> None:
        def settling() -> None:
            # From here the heartbeat neither renews nor reports this job (W4).
            with self._lock:
                entry.settling = True

        started = time.monotonic()

        def overrun() -> None:
            with self._lock:
                entry.overrun = True
            self._wake_heartbeat.set()  # report the lost slot now, not a beat later

        try:
            attempt = executor.execute(
                entry.row, entry.token, before_settle=settling, on_overrun=overrun
            )
            if attempt.due_in is not None and attempt.landed:
                self._timer.wake_in(attempt.due_in)
            outcome = str(attempt.outcome)
            self.stats.outcomes[outcome] = self.stats.outcomes.get(outcome, 0) + 1
        except BaseException as exc:
            # Nothing may end a handler thread but the worker's own stop (W9): its slot
            # would be lost for good. Signals only ever reach the main thread, so a
            # BaseException here came from code that ran in this thread.
            self._crashed(executor, entry, exc, started)
        finally:
            with self._lock:
                self._held.pop(entry.row["id"], None)
                self._idle_changed.notify_all()
            if self.share is not None:
                self.share.give(1)  # wakes the other aliases' claim loops too
            # A freed concurrency slot wakes the queue's workers, this one too (L1).
            release_slots(executor.settler.db, entry.row)
            capped = entry.row.get("lease_key") is not None
            if self._saturated or capped or self.lifecycle.stopping.is_set():
                self._wake.set()

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
                "correlation_id": entry.row["correlation_id"],
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

    # -- heartbeat ---------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        db = self._database("heartbeat")
        try:
            while not self._finished.is_set():
                self.beat(db)
                self._wake_heartbeat.wait(self.settings.heartbeat_seconds)
                self._wake_heartbeat.clear()
        finally:
            db.close()

    def beat(self, db: DirectDatabase) -> None:
        """Renew every held lease and the registry row; act on what did not renew."""
        with self._lock:
            held = [e for e in self._held.values() if not e.settling]
        if held:
            try:
                rows = db.run(
                    JOB_HEARTBEAT,
                    ids=[e.row["id"] for e in held],
                    lease_owners=[e.row["lease_owner"] for e in held],
                    lease_seconds=self.settings.LEASE,
                    now=None,
                )
            except QueryError as exc:
                logger.warning(
                    "jobs.heartbeat.failed",
                    extra={"worker_id": self.worker_id, "error": str(exc)},
                )
                self._expire_unrenewed(held)
            else:
                self._apply_heartbeat(held, rows)
        self._register(db)

    def _apply_heartbeat(self, held: list[Held], rows: list[Heartbeat]) -> None:
        now = time.monotonic()
        by_id = {e.row["id"]: e for e in held}
        for row in rows:
            entry = by_id[row["id"]]
            if row["renewed"]:
                entry.renewed_at = now
                if entry.row.get("lease_key") and not row["slots"]:
                    self._lose_slot(entry)
                continue
            with self._lock:
                if entry.settling or row["id"] not in self._held:
                    continue  # it finished meanwhile: never a lost lease
            if row["state"] == "cancelled":
                if entry.token.cancel(CANCELLED):
                    logger.warning(
                        "jobs.run.cancelled",
                        extra={
                            "job_id": str(row["id"]),
                            "job_name": entry.row["name"],
                            "correlation_id": entry.row["correlation_id"],
                        },
                    )
            else:
                self._lose(entry)

    def _expire_unrenewed(self, held: list[Held]) -> None:
        now = time.monotonic()
        for entry in held:
            if now - entry.renewed_at >= self.settings.LEASE and not entry.settling:
                self._lose(entry)

    def _lose(self, entry: Held) -> None:
        if entry.token.cancel(LEASE_LOST):
            self.stats.leases_lost += 1
            logger.error(
                "jobs.lease.lost",
                extra={
                    "job_id": str(entry.row["id"]),
                    "job_name": entry.row["name"],
                    "queue": entry.row["queue"],
                    "worker_id": self.worker_id,
                    "correlation_id": entry.row["correlation_id"],
                },
            )
            metrics.lease_lost(entry.row["queue"])

    def _lose_slot(self, entry: Held) -> None:
        """The run's concurrency slot was taken over after a late renewal (L1, L2)."""
        with self._lock:
            if entry.settling or entry.row["id"] not in self._held:
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

    def overrun_ids(self) -> list[uuid.UUID]:
        """The jobs whose bodies ran past their deadline and still hold a thread."""
        with self._lock:
            return [job_id for job_id, entry in self._held.items() if entry.overrun]

    def _register(self, db: DirectDatabase) -> None:
        overrun = self.overrun_ids()
        try:
            rows = db.run(
                QUERIES["worker_beat"],
                id=self.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=self.started_at,
                queues=self.queues,
                slots=self.concurrency,
                in_flight=self.held_ids()[:100],
                abandoned=len(overrun),
                abandoned_jobs=overrun[:100],
                lease_seconds=self.settings.LEASE,
                now=None,
            )
        except QueryError as exc:
            logger.warning(
                "jobs.worker.register-failed",
                extra={"worker_id": self.worker_id, "error": str(exc)},
            )
            return
        if rows and rows[0]["drain"] and not self.lifecycle.stopping.is_set():
            # An operator's drain request (issue 15): finish what runs, claim nothing.
            logger.warning(
                "jobs.worker.drain-requested", extra={"worker_id": self.worker_id}
            )
            self.lifecycle.stop(FINISH)

    def _remove_registration(self, db: DirectDatabase) -> None:
        try:
            db.run(QUERIES["worker_remove"], id=self.worker_id)
        except QueryError:
            pass  # the row expires on its own

    # -- stopping ----------------------------------------------------------------

    def _on_stop(self, reason: str) -> None:
        self._wake.set()
        if reason == FINISH:
            return  # --max-jobs: the runs in flight finish undisturbed
        with self._lock:
            held = list(self._held.values())
        for entry in held:
            entry.token.cancel(DRAINING)

    def _on_abandon(self) -> None:
        with self._lock:
            self._idle_changed.notify_all()

    def _drain(self, db: DirectDatabase) -> None:
        deadline = time.monotonic() + self.settings.DRAIN_TIMEOUT
        with self._lock:
            while self._held and not self.lifecycle.abandoning.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._idle_changed.wait(min(remaining, 0.5))
            left = [e for e in self._held.values() if not e.settling]
        if not left:
            return
        logger.error(
            "jobs.worker.drain-abandoned",
            extra={
                "worker_id": self.worker_id,
                "job_ids": [str(e.row["id"]) for e in left],
            },
        )
        settler = Settler(db)
        for entry in left:
            entry.token.cancel(DRAINING)
            try:
                settler.release(entry.row, uncount=False)  # the attempt is counted
                self.stats.abandoned += 1
            except QueryError as exc:
                logger.error(
                    "jobs.worker.release-failed",
                    extra={"job_id": str(entry.row["id"]), "error": str(exc)},
                )

    # -- plumbing ----------------------------------------------------------------

    def _database(self, purpose: str) -> DirectDatabase:
        return DirectDatabase(
            self.alias,
            application_name=f"ultimate_jobs {purpose} {self.worker_id}"[:63],
        )

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread


def _buried(row: Staged) -> ClaimedJob:
    """A row job_stage buried, in the shape announcements take."""
    fields = {k: v for k, v in row.items() if k not in ("staged", "ready")}
    return cast(
        ClaimedJob, {"buried": True, "refused": False, **fields, "lease_key": None}
    )
