"""The archive mover (Q2): finished jobs leave the hot table for their day of the archive.

``move()`` is one pass, run by the ``Mover`` chore of the maintenance host
(maintenance/host.py: in the scheduler leader, or a process of its own) and by the
benchmark (benchmarks/archive.py):

1. one clock reading, and the oldest finish time the hot table holds;
2. the day partitions from that day to ``DAYS_AHEAD`` days after today are made
   (``ultimate_jobs_archive_ensure``: idempotent, cheap when they exist), so a move
   never meets a missing day, even after a week without a leader;
3. up to ``max_batches`` statements of ``archive_move``, each moving at most ``batch``
   rows atomically (SKIP LOCKED: two movers never take the same row; a killed one
   leaves every row in one table), until one moves fewer than ``batch``.

The leader's cadence: at once after a full pass, ``MOVE_EVERY`` after one that moved
rows, ``idle_every(ARCHIVE_AFTER)`` after one that moved none (5 minutes by default:
an idle leader reads almost nothing more, C8), so a finished job leaves the hot table
between ``ARCHIVE_AFTER`` and six times ``ARCHIVE_AFTER`` after it finished.

A failure (the partition could not be made, a statement timed out) is logged and the
rows stay hot: nothing is lost, the table is only larger until the next pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.db import Database
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.sql import QUERIES

logger = logging.getLogger(__name__)

DAYS_AHEAD = 7  # partitions made ahead of today
MOVE_EVERY = timedelta(seconds=5)  # between the leader's passes while rows move
MOVE_IDLE_EVERY = timedelta(minutes=5)  # after a pass that moved nothing (C8), at most
MOVE_BATCHES = 10  # archive_move statements per pass of the leader, at most


def idle_every(after: float) -> timedelta:
    """How long a leader waits after a pass that moved nothing: five times
    ARCHIVE_AFTER, at least MOVE_EVERY and at most MOVE_IDLE_EVERY (5 minutes with
    the default minute), so an idle leader reads almost nothing (C8) and a finished
    job still leaves within six times ARCHIVE_AFTER."""
    idle = timedelta(seconds=5 * after)
    return min(max(idle, MOVE_EVERY), MOVE_IDLE_EVERY)


@dataclass(frozen=True, slots=True)
class Pass:
    """What one pass did: rows moved, partitions made, whether rows were left."""

    moved: int
    made: int
    full: bool  # the last batch was full: more rows are due now


def day_start(moment: datetime) -> datetime:
    """The start (UTC midnight) of the UTC day of ``moment``."""
    return datetime.combine(moment.astimezone(UTC).date(), time(0), tzinfo=UTC)


def ensure_days(db: Database, first: datetime, last: datetime) -> int:
    """Make the missing day partitions from the day of ``first`` to the day of ``last``."""
    [row] = db.run(
        QUERIES["archive_ensure"],
        first=first.astimezone(UTC).date(),
        last=last.astimezone(UTC).date(),
    )
    return int(row["made"])


def move(
    db: Database,
    *,
    after: float,
    batch: int,
    max_batches: int,
    now: datetime | None = None,
) -> Pass:
    """One pass of the mover: see the module. ``after`` is ARCHIVE_AFTER in seconds;
    ``now`` drives the clock (tests), None is the database's."""
    [clock] = db.run(QUERIES["archive_clock"], now=now)
    current: datetime = clock["now"]
    oldest: datetime | None = clock["oldest"]
    made = ensure_days(db, oldest or current, current + timedelta(days=DAYS_AHEAD))
    if oldest is None:
        return Pass(moved=0, made=made, full=False)
    covered = day_start(oldest)
    moved = 0
    for _ in range(max_batches):
        [row] = db.run(
            QUERIES["archive_move"],
            now=now,
            after_seconds=after,
            covered=covered,
            batch=batch,
        )
        count = int(row["moved"])
        moved += count
        if count < batch:
            return Pass(moved=moved, made=made, full=False)
    return Pass(moved=moved, made=made, full=True)


class Mover:
    """The archive chore (Q2): one bounded pass of ``move`` when due, on the cadence
    of the module; a failed pass leaves the rows hot and is tried again at the next
    cadence."""

    name = "archive"

    def __init__(self, settings: JobsSettings) -> None:
        self.settings = settings
        self.moved_at: datetime | None = None  # the last pass (None: due now)
        self.again = False  # the last pass was full: more rows are due
        self.every = MOVE_EVERY  # idle_every() after a pass that moved none

    def begin(self, current: datetime) -> None:
        """Leadership (re)began: nothing to forget."""

    def due(self, current: datetime) -> bool:
        return (
            self.again or self.moved_at is None or current - self.moved_at >= self.every
        )

    def run_once(
        self, db: Database, current: datetime, driven: datetime | None
    ) -> Pass | None:
        """One pass; answers what it did (None: it failed and was logged)."""
        self.moved_at = current
        self.again = False
        try:
            done = move(
                db,
                after=self.settings.ARCHIVE_AFTER,
                batch=self.settings.PURGE_BATCH,
                max_batches=MOVE_BATCHES,
                now=driven,
            )
        except QueryError as exc:
            logger.warning("jobs.archive.move-failed", extra={"error": str(exc)})
            return None
        self.again = done.full
        # C8: an idle leader reads nothing it does not need; a pass that found nothing
        # to move waits the idle cadence, one that moved rows the busy one.
        self.every = (
            MOVE_EVERY if done.moved else idle_every(self.settings.ARCHIVE_AFTER)
        )
        if done.moved or done.made:
            logger.info(
                "jobs.archive.moved",
                extra={"moved": done.moved, "partitions_made": done.made},
            )
        return done
