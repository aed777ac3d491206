"""The worker: claim, run, settle, heartbeat, drain (W1-W9).

A worker is made of parts around one ledger of held runs (held.py): the claimer
(claimer.py: stage → plain → limited → admit), the pool of handler threads and the
drain (pool.py), and the heartbeat (heartbeat.py). ``Worker`` composes them and runs
the claim loop; ``run_once()`` is one round of it. Threads, each with its own database
connection (``DirectDatabase``):

* the claim loop (the caller's thread): one statement takes at most as many rows as
  there are free slots (W2), plus at most ``PREFETCH`` more for the plain claim, so a
  backlog never becomes an unbounded fan-out: the plain claim for declared jobs
  without a fleet cap, the limited claim for capped ones (or all, under a budget:
  exactly the free slots, never prefetched), and only names this deploy declares.
  A claim's rows are held in one step and queued for the handler threads; prefetched
  rows wait there, their leases renewed (W4), and a handler that finishes takes the
  next one without a wake. While busy the loop claims again once half the prefetch is
  taken (a batch worth a statement), not per finished run. Due delayed rows and
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
with their attempt counted. Prefetched rows no handler started are handed back at once,
their attempt not counted, and never run. A second signal ends the drain at once.
"""

from __future__ import annotations

import contextlib
import gc
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
# PREFETCH's default: as many rows as threads, at most this (measured at c=16:
# docs/benchmarks.md, issue 26).
DEFAULT_PREFETCH_MAX = 16


def default_prefetch(concurrency: int) -> int:
    """PREFETCH unset: as many as the threads, at most DEFAULT_PREFETCH_MAX; none for
    one thread (a serial worker stays one job at a time)."""
    return 0 if concurrency <= 1 else min(concurrency, DEFAULT_PREFETCH_MAX)


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
        prefetch: int | None = None,
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
        # Rows the plain claim takes beyond the free slots (issue 26): none under a
        # process budget (L3: every name is claimed for exactly the free slots) or when
        # aliases share the slots (their pools would start them past the share).
        if prefetch is None:
            prefetch = settings.PREFETCH
        if prefetch is None:
            prefetch = default_prefetch(self.concurrency)
        if self.budget.limits.bounded or share is not None:
            prefetch = 0
        self.prefetch = prefetch
        # While busy, the rows worth one claim statement (N3): a quarter of the slots,
        # or half the prefetch, so the other half covers the claim's round trip.
        self._batch = max(
            min(max(2, self.concurrency // 4), self.concurrency), (prefetch + 1) // 2
        )
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
        # N2: the objects of the process's start (Django, the app's modules, tens of
        # thousands) leave the collector's generations while the worker serves, so a
        # full collection walks only what the jobs left, not all of them (a third
        # of the collector's time draining no-op jobs). Put back when the loop ends:
        # an embedding process (tests) collects them again.
        gc.freeze()
        try:
            self._claim_loop()
            self.stats.abandoned += self.pool.drain(
                self.db,
                self.settings.DRAIN_TIMEOUT,
                self.worker_id,
                withhold=self.lifecycle.reason != FINISH,
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
            gc.unfreeze()
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
        """One round of the claim loop: claim for the free slots (and PREFETCH more of
        the plain names) and hand the runs to the pool. Answers how many it started,
        None when there was no room, or when prefetched rows keep every handler busy
        and a claim would not yet be worth its statement."""
        free = self._free_slots()
        room = self._room(free)
        if room <= 0:
            return None
        if self._saturated and room < self._batch:
            if self.prefetch and self.ledger.waiting_count:
                return None  # the handlers have rows: claim once a batch is worth it
            # Busy: let a few more slots come free so one claim fills them (N3),
            # rather than one claim statement per finished job. With one slot no
            # other can come free: waiting would only stall every claim.
            self.lifecycle.wait(min(GATHER, self.settings.POLL_INTERVAL))
            free = self._free_slots()
            room = self._room(free)
        slots = max(free, 0)
        taken = slots if self.share is None else self.share.take(slots)
        if taken <= 0 and room <= slots:
            return None  # the other aliases' loops hold every slot
        claimed = 0
        extra = room - slots  # prefetch only for the plain names; 0 with a share
        try:
            claimed = self._claim(taken, extra)
        finally:
            if self.share is not None:
                self.share.give(taken - claimed, wake=False)  # left unfilled
        # Under a budget a finishing run may make room: it wakes the loop (L3).
        self._saturated = claimed >= taken + extra or self.budget.limits.bounded
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
        """The slots no held run takes (W2): negative while prefetched rows wait."""
        free = self.ledger.free(lambda held: self.budget.free(self.concurrency, held))
        if self._claims_left is not None:
            if self._claims_left <= 0:
                self.lifecycle.stop(FINISH)
            free = min(free, self._claims_left)
        return free

    def _room(self, free: int) -> int:
        """What the plain claim may take: the free slots plus PREFETCH, within what
        --max-jobs leaves (every claimed row counts: it is run, max_jobs stays exact)."""
        if not self.prefetch:
            return free
        room = free + self.prefetch
        if self._claims_left is not None:
            room = min(room, self._claims_left)
        return room

    def _claim(self, limit: int, prefetch: int = 0) -> int:
        if limit <= 0 and prefetch <= 0:
            return 0
        rows = self.claimer.run_once(limit, prefetch=prefetch)
        self.pool.submit_all(rows, slots=limit)  # the rest were prefetched
        claimed = len(rows)
        self.stats.claimed += claimed
        if self._claims_left is not None:
            self._claims_left -= claimed
        return claimed

    def _freed(self, row: ClaimedJob) -> None:
        """A run left the ledger: its slot is free for this loop and the others."""
        if self.share is not None:
            self.share.give(1)  # wakes the other aliases' claim loops too
        wake = self._wake
        if wake.is_set():
            # Already set: the loop clears it before its next round, which then sees
            # this run gone from the ledger. Event.set would take a lock and notify
            # nobody, once per finished job (N2).
            return
        if row.get("lease_key") is not None or self.lifecycle.stopping.is_set():
            wake.set()
        elif self._saturated and (
            not self.prefetch
            or not self.ledger.waiting_count
            or self.concurrency + self.prefetch - self.ledger.held_count >= self._batch
        ):
            # With prefetched rows waiting, the loop wakes only when a claim is worth
            # its statement (or the handlers ran out of rows), not per finished run.
            wake.set()

    # -- stopping ----------------------------------------------------------------

    def _on_stop(self, reason: str) -> None:
        self._wake.set()
        if reason == FINISH:
            return  # --max-jobs: the runs in flight (prefetched too) finish undisturbed
        # W6: no prefetched row starts from now on (a row claimed for a free slot still
        # does); the drain hands them back, attempt not counted.
        self.ledger.withholding = True
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
