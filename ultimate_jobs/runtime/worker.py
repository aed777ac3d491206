"""The worker: claim, run, settle, heartbeat, drain (W1-W9).

A worker is made of parts around one ledger of held runs (held.py): the claimer
(claimer.py: stage → plain → limited → admit), the pool of handler threads and the
drain (pool.py), and the heartbeat (heartbeat.py). ``Worker`` composes them and runs
the claim loop; ``run_once()`` is one round of it. Threads, each with its own database
connection (``DirectDatabase``):

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
  lease (W4) and keeps the worker's registry row fresh (W8); while the worker is idle
  its poll's staging pass refreshes that row before the beat would, so an idle poll
  stays one statement and the beat sends none (N2, issue 26).
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
import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.limits.budgets import Budget, Limits
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.claimer import Claimer
from ultimate_jobs.runtime.fallback import HeldFallback
from ultimate_jobs.runtime.heartbeat import Beat
from ultimate_jobs.runtime.held import Ledger
from ultimate_jobs.runtime.lifecycle import DRAIN, FINISH, Lifecycle
from ultimate_jobs.runtime.pool import Pool
from ultimate_jobs.runtime.rides import Rides
from ultimate_jobs.runtime.share import SlotShare
from ultimate_jobs.runtime.timers import WakeTimer
from ultimate_jobs.runtime.wake import QUEUE_CHANNEL, Wake
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)

# While saturated, how long a freed slot waits for others before the claim (seconds).
GATHER = 0.002
# After a claim that left slots free, when to look again for rows whose wake N1's
# throttle held back (seconds): bounds such a row's wait to this, not a poll.
RELOOK = 0.02
MAX_WORKER_ID = 200  # the registry's id column and the job rows' worker_id


@dataclass
class WorkerStats:
    """What this worker did, by outcome; for logs and tests."""

    claimed: int = 0
    abandoned: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


class Worker:
    """One worker: a claim loop over a claimer, a pool and a heartbeat."""

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
        rides: Rides | None = None,
    ) -> None:
        self.settings = settings = settings or get_settings()
        # Q1: the alias whose queues this worker claims (DATABASE unless a process
        # serves several, runtime/share.py), and the slots its claim loops share.
        self.alias = alias or settings.DATABASE
        self.share = share
        self.jobs = jobs
        self.lifecycle = lifecycle or Lifecycle()
        self.notifications = wake
        self.queues = list(queues or settings.QUEUES or jobs.queues() or ["default"])
        self.concurrency = concurrency or settings.CONCURRENCY
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
        self.ledger = Ledger()
        self._wake = threading.Event()
        self._saturated = False
        self._claims_left = max_jobs
        # Retries and sleeps this worker parked that come due within a minute.
        self._timer = WakeTimer(self._wake_to_stage)
        self.db = self._database("worker")  # the claim loop's own connection
        self.claimer = Claimer(
            self.db,
            jobs=jobs,
            queues=self.queues,
            worker_id=self.worker_id,
            lease=settings.LEASE,
            stage_every=settings.POLL_INTERVAL,
            budget=self.budget,
            holding=self.ledger.rows,
            tally=self.stats.outcomes,
        )
        self.heartbeat = Beat(
            self.ledger,
            worker_id=self.worker_id,
            queues=self.queues,
            slots=self.concurrency,
            lease=settings.LEASE,
            every=settings.heartbeat_seconds,
            lifecycle=self.lifecycle,
            names=jobs.names(),
        )
        # The idle registry row rides the poll's staging pass (W8, N2, issue 26): the
        # next poll is at most the idle ceiling away.
        self.claimer.carry = lambda: self.heartbeat.carry(self.idle_ceiling())
        self.claimer.carried = self.heartbeat.carried
        # So do the leader lease and the relay's idle poll of this process on this
        # alias (C3, O2, N2; runtime/rides.py).
        if rides is not None:
            ride = rides.of(self.alias)
            ride.horizon = lambda: self.idle_ceiling()
            self.claimer.ride = ride.params
            self.claimer.rode = ride.answered
        self.pool = Pool(
            self.ledger,
            alias=self.alias,
            jobs=jobs,
            concurrency=self.concurrency,
            size=settings.POOL_SIZE,
            worker_id=self.worker_id,
            lease=settings.LEASE,
            lifecycle=self.lifecycle,
            tally=self.stats.outcomes,
            on_overrun=self.heartbeat.now.set,
            on_due=self._timer.wake_in,
            on_freed=self._freed,
        )
        self.lifecycle.on_stop(self._on_stop)
        self.lifecycle.on_abandon(self.ledger.notify)

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
        acks_db = self._held("acks")  # falls back on the pool (runtime/fallback.py)
        # batched completions (N3)
        acks = Acks(acks_db, retry_for=self.settings.LEASE, alias=self.alias)
        self.pool.open()
        with contextlib.suppress(QueryError):
            acks_db.connect()
        self.pool.spawn(acks)
        heartbeat_db = self._held("heartbeat")
        threading.Thread(
            target=self.heartbeat.loop,
            args=(heartbeat_db,),
            name="jobs-heartbeat",
            daemon=True,
        ).start()
        try:
            self._claim_loop()
            self.stats.abandoned += self.pool.drain(
                self.db, self.settings.DRAIN_TIMEOUT, self.worker_id
            )
        finally:
            # Completions handed over before the drain ended are written first.
            acks.close(timeout=self.settings.LEASE)
            acks_db.close()
            self.heartbeat.stop()
            self._timer.stop()
            self.pool.close()
            self.heartbeat.remove_registration(self.db)
            self.db.close()
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
            # One hop: the claim runs first; only when it finds nothing does the
            # staging pass look for a row not ready yet (a resumed wait, a promotion).
            self.claimer.claim_soon()
            self.wake()

    def _wake_to_stage(self) -> None:
        self.claimer.stage_soon()
        self.wake()

    def idle_ceiling(self) -> float:
        """The idle poll ceiling: longer once the LISTEN wake is proven (N1)."""
        if self.notifications is not None and self.notifications.proven.is_set():
            return self.settings.WOKEN_IDLE_POLL_MAX
        return self.settings.IDLE_POLL_MAX

    def held_ids(self) -> list[uuid.UUID]:
        return self.ledger.ids()

    def overrun_ids(self) -> list[uuid.UUID]:
        """The jobs whose bodies ran past their deadline and still hold a thread."""
        return self.ledger.overrun_ids()

    # -- claiming ----------------------------------------------------------------

    def run_once(self) -> int | None:
        """One round of the claim loop: claim for the free slots and hand the runs to
        the pool. Answers how many it started, None when no slot was free."""
        free = self._free_slots()
        if free <= 0:
            return None
        gather_until = min(max(2, self.concurrency // 4), self.concurrency)
        if self._saturated and free < gather_until:
            # Busy: let a few more slots come free so one claim fills them (N3),
            # rather than one claim statement per finished job. With one slot no
            # other can come free: waiting would only stall every claim.
            self.lifecycle.wait(min(GATHER, self.settings.POLL_INTERVAL))
            free = self._free_slots()
        taken = free if self.share is None else self.share.take(free)
        if taken <= 0:
            return None  # the other aliases' loops hold every slot
        claimed = 0
        try:
            claimed = self._claim(taken)
        finally:
            if self.share is not None:
                self.share.give(taken - claimed, wake=False)  # left unfilled
        # Under a budget a finishing run may make room: it wakes the loop (L3).
        self._saturated = claimed >= free or self.budget.limits.bounded
        return claimed

    def _claim_loop(self) -> None:
        """Until stopped: ``run_once()``, then wait: a poll while full, RELOOK after a
        claim that left slots free, a doubling poll while idle (N1, N3)."""
        poll = self.settings.POLL_INTERVAL
        idle = poll
        failures = 0
        while not self.lifecycle.stopping.is_set():
            try:
                claimed = self.run_once()
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
            if failures:
                logger.info("jobs.db.reconnected", extra={"worker_id": self.worker_id})
                failures = 0
            if claimed is None:
                self._wait(poll)
            elif claimed:
                idle = poll
                if not self._saturated:
                    # N1's enqueue throttle keeps a queue's wake silent while a row of
                    # it is still ready: a row committed while this claim ran may be
                    # announced by nobody. One staging pass RELOOK later finds it.
                    self.claimer.stage_soon()
                    self._wait(min(RELOOK, poll))
            else:
                self._wait(min(idle, self.budget.retry_in() or idle))
                idle = min(idle * 2, self.idle_ceiling())

    def _wait(self, seconds: float) -> None:
        if self._wake.wait(seconds):
            self._wake.clear()

    def _free_slots(self) -> int:
        free = self.ledger.free(lambda held: self.budget.free(self.concurrency, held))
        if self._claims_left is not None:
            if self._claims_left <= 0:
                self.lifecycle.stop(FINISH)
            free = min(free, self._claims_left)
        return free

    def _claim(self, limit: int) -> int:
        if limit <= 0:
            return 0
        rows = self.claimer.run_once(limit)
        for row in rows:
            self.pool.submit(row)
        claimed = len(rows)
        self.stats.claimed += claimed
        if self._claims_left is not None:
            self._claims_left -= claimed
        return claimed

    def _freed(self, row: ClaimedJob) -> None:
        """A run left the ledger: its slot is free for this loop and the others."""
        if self.share is not None:
            self.share.give(1)  # wakes the other aliases' claim loops too
        capped = row.get("lease_key") is not None
        if self._saturated or capped or self.lifecycle.stopping.is_set():
            self._wake.set()

    # -- stopping ----------------------------------------------------------------

    def _on_stop(self, reason: str) -> None:
        self._wake.set()
        if reason == FINISH:
            return  # --max-jobs: the runs in flight finish undisturbed
        self.pool.cancel_all()

    def _held(self, purpose: str) -> HeldFallback:
        """Issue 31: a renewal or a settle whose own connection cannot be dialled runs
        on the handler pool, waiting for it at most a third of the lease."""
        return HeldFallback(
            self.alias,
            application_name=f"ultimate_jobs {purpose} {self.worker_id}"[:63],
            backup=self.pool.connections,
            wait=self.settings.LEASE / 3,
        )

    def _database(self, purpose: str) -> DirectDatabase:
        return DirectDatabase(
            self.alias,
            application_name=f"ultimate_jobs {purpose} {self.worker_id}"[:63],
        )
