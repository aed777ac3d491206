"""The maintenance host: the leader's chores, outside the cron loop (issue 25 item 6).

A chore is a module of this package with a class that has ``due(current)``,
``run_once(db, current, driven)`` and ``begin(current)`` (leadership began):
``archive.Mover`` moves finished jobs into the archive (Q2), ``rollup.RollUp`` folds
counter buckets (P5). The retention purge is not a chore: it is a job the cron task
``ultimate_jobs.purge_hourly`` puts on the queue (jobs.py, retention/), so it runs on a
worker with its retries and shows in the admin.

One host works on one alias's tables (Q1), and only while it leads:

* the scheduler starts one (scheduling/scheduler.py) and it follows the scheduler's
  own leader lease: each round the scheduler leads it calls ``run_due``, so a
  scheduler process makes no statement more for it;
* on its own (``jobs_worker --roles worker,maintenance``, management/roles.py) it
  holds a lease of its own role, ``maintenance``, and ``run()`` loops until the
  lifecycle stops. ``run_once(now=...)`` is one round, for tests. Run it where no
  scheduler runs: beside one, the two leaders' chores are safe together (the mover
  takes rows with SKIP LOCKED, a roll-up folds what is there) but do the work twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.ground.ids import process_name
from ultimate_jobs.maintenance.archive import Mover
from ultimate_jobs.maintenance.leader import Leadership, LeaseHolder
from ultimate_jobs.maintenance.rollup import RollUp
from ultimate_jobs.runtime.lifecycle import Lifecycle

logger = logging.getLogger(__name__)

MAINTENANCE_ROLE = "maintenance"


class Chore(Protocol):
    """One job of the leader, run when due."""

    name: str

    def begin(self, current: datetime) -> None: ...

    def due(self, current: datetime) -> bool: ...

    def run_once(
        self, db: Database, current: datetime, driven: datetime | None
    ) -> object: ...


def default_chores(settings: JobsSettings) -> list[Chore]:
    return [Mover(settings), RollUp()]


class Maintenance(LeaseHolder):
    """The chores of one alias, run while this process leads."""

    name = "maintenance"
    role = MAINTENANCE_ROLE
    application_name = "ultimate_jobs maintenance"

    def __init__(
        self,
        *,
        settings: JobsSettings | None = None,
        lifecycle: Lifecycle | None = None,
        db: Database | None = None,
        alias: str | None = None,
        chores: Sequence[Chore] | None = None,
        holder: str | None = None,
        clock: Callable[[], datetime] | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings or get_settings()
        self.alias = alias or self.settings.DATABASE
        self.lifecycle = lifecycle or Lifecycle()
        self.chores = list(
            chores if chores is not None else default_chores(self.settings)
        )
        self.holder = holder or process_name()
        self.clock = clock
        self.wall = wall
        self._db = db
        self._leadership: Leadership | None = None

    # -- the chores (the scheduler calls these on its own lease) -----------------------

    def begin(self, current: datetime) -> None:
        """Leadership began (or the leader reloaded): every chore starts over."""
        for chore in self.chores:
            chore.begin(current)

    def run_due(
        self, db: Database, current: datetime, driven: datetime | None
    ) -> list[str]:
        """Run every chore that is due at ``current``; answers their names."""
        ran = []
        for chore in self.chores:
            if chore.due(current):
                chore.run_once(db, current, driven)
                ran.append(chore.name)
        return ran

    # -- on its own: a lease of the maintenance role ------------------------------------

    # Its session and lease (db, leadership): maintenance/leader.py LeaseHolder.

    def run_once(self, now: datetime | None = None) -> list[str]:
        """One round: renew or ask for the lease when due, then run the due chores.
        ``now`` drives the clock (tests); answers the chores that ran."""
        driven = now or (self.clock() if self.clock is not None else None)
        local = driven.timestamp() if driven is not None else time.monotonic()
        leadership = self.leadership
        if leadership.due(local):
            was_leading = leadership.is_leading(local)
            if leadership.acquire(local, driven) and not was_leading:
                self.begin(driven or leadership.database_now())
        if not leadership.is_leading(local):
            return []
        return self.run_due(self.db, driven or leadership.database_now(), driven)

    def run(self) -> int:
        """Lead and run the chores until the lifecycle stops; hand the lease back."""
        logger.info(
            "jobs.maintenance.started",
            extra={"holder": self.holder, "alias": self.alias},
        )
        try:
            while not self.lifecycle.stopping.is_set():
                try:
                    self.run_once()
                except QueryError as exc:
                    logger.warning(
                        "jobs.maintenance.round-failed",
                        extra={"holder": self.holder, "error": str(exc)},
                    )
                wait = min(
                    self.settings.SCHEDULER_TICK,
                    self.leadership.seconds_to_next_attempt(time.monotonic()),
                )
                self.lifecycle.stopping.wait(max(wait, 0.01))
        finally:
            self.leadership.release(None)
            if isinstance(self._db, DirectDatabase):
                self._db.close()
            logger.info("jobs.maintenance.stopped", extra={"holder": self.holder})
        return 0

    def stop(self) -> None:
        self.lifecycle.stop()
