"""The scheduler role: fires cron tasks and runtime schedules, one leader at a time.

Every scheduler process competes for one lease (maintenance/leader.py); only the leader fires.
While it leads it holds every task's watermark in memory and the next occurrence of
each (one cron evaluation per occurrence): an idle round compares datetimes and reads
nothing (C8). The database is read when leadership begins (one statement for all
watermarks, one for the runtime schedules) and when the schedules changed (a
notification, or the revision the lease renewal answers).

The firing itself is firing.py's: an occurrence fires in ONE statement
(``scheduler_fire``) that moves the watermark and inserts the jobs, fenced on the lease
and on the watermark it expects (C4), per the catch-up policy (C5).

A stop (SIGTERM, the process Lifecycle) ends the loop after the round in progress and
hands the lease back. ``run_once(now=...)`` runs one round on a driven clock, for tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.ground.ids import process_name
from ultimate_jobs.maintenance.host import Maintenance
from ultimate_jobs.maintenance.leader import Leadership, LeaseHolder
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.rides import Rides
from ultimate_jobs.runtime.wake import Wake
from ultimate_jobs.scheduling.firing import Fire, Firing
from ultimate_jobs.scheduling.tasks import TaskRegistry, task_registry

logger = logging.getLogger(__name__)

SCHEDULER_CHANNEL = "ultimate_jobs_scheduler"


class Scheduler(LeaseHolder):
    """The scheduler role of one process: a lease, and the fires while it leads."""

    name = "scheduler"

    def __init__(
        self,
        *,
        settings: JobsSettings | None = None,
        lifecycle: Lifecycle | None = None,
        wake: Wake | None = None,
        task_registry: TaskRegistry = task_registry,
        jobs: Registry = registry,
        db: Database | None = None,
        clock: Callable[[], datetime] | None = None,
        holder: str | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        alias: str | None = None,
        maintenance: Maintenance | None = None,
        rides: Rides | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        # Q1: the alias this scheduler leads on (its leader lease and watermarks); it
        # fires the rows of each occurrence whose queues live there.
        self.alias = alias or self.settings.DATABASE
        self.lifecycle = lifecycle or Lifecycle()
        self.notifications = wake
        self.tasks = task_registry
        self.jobs = jobs
        self.clock = clock
        self.wall = wall  # this host's clock: only ever read through the offset (C9)
        self.holder = holder or process_name()
        self._db = db
        self._leadership: Leadership | None = None
        self.firing = Firing(
            settings=self.settings,
            alias=self.alias,
            holder=self.holder,
            tasks=self.tasks,
            jobs=self.jobs,
            lifecycle=self.lifecycle,
            db=lambda: self.db,
            leadership=lambda: self.leadership,
        )
        # The leader's chores (archive move, counter roll-up), run on this lease.
        self.maintenance = maintenance or Maintenance(
            settings=self.settings, alias=self.alias
        )
        self._flags: set[str] = set()  # set by notifications, read by the round
        self._flags_lock = threading.Lock()
        self._nudge = threading.Event()
        self._listening = False
        self.lifecycle.on_stop(lambda reason: self._nudge.set())
        # C3, N2 (issue 26): the idle poll of this process's worker on the same alias
        # carries the lease renewal (runtime/rides.py); on the process's own clock only.
        self.ride = (
            rides.of(self.alias) if rides is not None and clock is None else None
        )
        if self.ride is not None:
            self.ride.leadership = lambda: self._leadership
            self.ride.on_lost = self._nudge.set

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> int:
        """Compete for the lease and fire while leading, until the lifecycle stops."""
        owned = self._db is None
        self.listen()
        logger.info(
            "jobs.scheduler.started",
            extra={
                "holder": self.holder,
                "tasks": len(self.tasks),
                "alias": self.alias,
            },
        )
        try:
            while not self.lifecycle.stopping.is_set():
                try:
                    self.run_once()
                except QueryError as exc:
                    logger.warning(
                        "jobs.scheduler.round-failed",
                        extra={"holder": self.holder, "error": str(exc)},
                    )
                    self.firing.loaded = False  # a fire may have landed: read it back
                self._nudge.wait(self._sleep_for())
                self._nudge.clear()
        finally:
            self.leadership.release(self._now_param())
            if owned and isinstance(self._db, DirectDatabase):
                self._db.close()
            logger.info(
                "jobs.scheduler.stopped",
                extra={"holder": self.holder, "fired": self.firing.fired},
            )
        return 0

    @property
    def fired(self) -> int:
        """How many occurrences this scheduler fired."""
        return self.firing.fired

    def stop(self) -> None:
        self.lifecycle.stop()

    def listen(self) -> None:
        """Hear the scheduler channel on the process's wake session (once)."""
        if self.notifications is not None and not self._listening:
            self._listening = True
            self.notifications.subscribe(SCHEDULER_CHANNEL, self._on_notification)
            self.notifications.start()

    # Its session and lease (db, leadership): maintenance/leader.py LeaseHolder.

    def lease_grace(self, renew_every: float) -> float:
        return self.ride.grace(renew_every) if self.ride is not None else 0.0

    @property
    def leading(self) -> bool:
        return self.leadership.leading

    def run_once(self, now: datetime | None = None) -> list[Fire]:
        """One round: renew or ask for the lease when due, then fire what is due.

        ``now`` drives the clock (tests): it is the time of the round, and the
        statements use it instead of the database's clock.
        """
        driven = now or (self.clock() if self.clock is not None else None)
        local = self._local(driven)
        self._read_flags()
        leadership = self.leadership
        if leadership.due(local):
            was_leading = leadership.is_leading(local)
            if leadership.acquire(local, driven) and not was_leading:
                self.firing.loaded = False  # another leader may have fired meanwhile
        # The revision answers each renewal, this round's or one a poll carried.
        if leadership.schedules_revision != self.firing.schedules_revision:
            self.firing.schedules = None
        # C9: the time of the round is the database's, read through the offset the
        # lease statement measured; the host's own clock may be wrong.
        current = driven or leadership.database_now()
        if not leadership.is_leading(local):
            if self.firing.loaded:
                logger.warning(
                    "jobs.scheduler.stepped-down", extra={"holder": self.holder}
                )
            self.firing.loaded = False
            return []
        if not self.firing.loaded or self.firing.schedules is None:
            self.firing.load(current, driven)
            self.maintenance.begin(current)
        self.maintenance.run_due(self.db, current, driven)
        if self.firing.earliest is None or self.firing.earliest > current:
            return []  # idle: no cron evaluation, no statement
        return self.firing.fire_due(current, driven)

    def _sleep_for(self) -> float:
        local = self._local(None)
        wait = min(
            self.settings.SCHEDULER_TICK,
            self.leadership.seconds_to_next_attempt(local),
        )
        if self.firing.earliest is not None and self.leadership.is_leading(local):
            until_due = (
                self.firing.earliest - self.leadership.database_now()
            ).total_seconds()
            # Due already after a round (a run-all backlog, a paused task): next tick,
            # never a burst; due soon: wake for it rather than up to a tick late.
            if until_due > 0:
                wait = min(wait, until_due)
        return max(wait, 0.01)

    def _local(self, driven: datetime | None) -> float:
        return driven.timestamp() if driven is not None else time.monotonic()

    def _now_param(self) -> datetime | None:
        return self.clock() if self.clock is not None else None

    # -- notifications (called on the wake thread: they only set flags) ---------------

    def _on_notification(self, payload: str) -> None:
        with self._flags_lock:
            self._flags.add(payload)
        self._nudge.set()

    def _read_flags(self) -> None:
        with self._flags_lock:
            flags, self._flags = self._flags, set()
        if "lease" in flags and not self.leadership.leading:
            self.leadership.ask_now()
        if "schedules" in flags:
            self.firing.schedules = None
        if "resume" in flags:
            self.firing.resume()
