"""Leader election for the scheduler: a lease ROW with an expiry (C3).

Design notes.

* Why a row and not ``pg_try_advisory_lock``: an advisory lock belongs to a database
  session, and a pooled connection hands the session to someone else, so every node
  would read itself as the leader. A row with ``expires_at`` needs no connection
  affinity; ``leader_acquire`` is both the election and the renewal.
* Renewal: the leader renews every third of the TTL (30 s by default, so every 10 s).
  In a process whose worker polls the same alias, the worker's idle poll carries the
  renewal (runtime/rides.py), and the leader renews on its own only when no poll did
  within ``grace`` (half a third at most) of the renewal falling due.
  A standby asks every third of the TTL too, and, when the answer says the lease runs
  out sooner, right when it runs out: after a leader is killed a standby takes over
  within one TTL of the last renewal, which is within one TTL of the kill.
* Stepping down first: a leader counts its lease from the moment it SENT the renewal
  (the database's expiry is at least that late). It fires nothing once two thirds of
  the TTL have passed since the last renewal that landed: a third of the TTL before
  anyone else could take the lease. The fire statement is also fenced on the lease in
  SQL (scheduler_fire), so a leader whose clock or process stalled writes nothing.
* A clean stop hands the lease back (``leader_release``) and says so on the scheduler
  channel, so a standby takes over at once instead of at the expiry.

Time: ``local`` is a monotonic reading in seconds (``time.monotonic()`` in a process,
the driven clock's timestamp in tests); ``now`` is passed to the statements (None: the
database's clock, the one clock every node shares). Each acquire also reads the
database's clock and keeps ``clock_offset``, how far it is from this host's wall clock,
so the scheduler decides occurrences on the database's time (C9).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.sql.rows import LEADER_ACQUIRE, LEADER_RELEASE, Staged

logger = logging.getLogger(__name__)

SCHEDULER_ROLE = "scheduler"
RETRY_AFTER_FAILURE = 1.0  # seconds before asking again after a failed statement
EXPIRY_SLACK = 0.05  # ask this long after the lease ran out, not a moment before


class Leadership:
    """This process's view of one role's lease: whether it leads, and until when."""

    def __init__(
        self,
        db: Database,
        *,
        holder: str,
        ttl: float,
        role: str = SCHEDULER_ROLE,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        grace: Callable[[float], float] = lambda renew_every: 0.0,
    ) -> None:
        self.db = db
        # How long past a due renewal this leader waits for a worker's poll to carry
        # it before renewing on its own (runtime/rides.py); 0: nobody carries it.
        self.grace = grace
        self.wall = wall
        self.clock_offset = timedelta(0)  # the database's clock minus this host's
        self.holder = holder
        self.ttl = ttl
        self.role = role
        self.renew_every = ttl / 3
        self.leading = False
        self.term: int | None = None
        self.current_holder: str | None = None
        self.schedules_revision: str | None = None
        self._valid_until = 0.0  # local time after which nothing is fired
        self._next_attempt = 0.0  # local time of the next acquire or renewal
        self._renew_at = 0.0  # local time a renewal falls due (a poll may carry it)
        self._sent = float("-inf")  # local time the last renewal that landed was sent
        self._lock = threading.Lock()  # a worker's poll renews from its own thread

    def due(self, local: float) -> bool:
        """Whether it is time to renew (leading) or to ask again (standby)."""
        return local >= self._next_attempt

    def seconds_to_next_attempt(self, local: float) -> float:
        return max(self._next_attempt - local, 0.0)

    def is_leading(self, local: float) -> bool:
        """Leading, with the last renewal recent enough to act on."""
        return self.leading and local < self._valid_until

    def ask_now(self) -> None:
        """Ask at the next round (a leader let go: no need to wait for the expiry)."""
        self._next_attempt = 0.0

    def acquire(self, local: float, now: datetime | None) -> bool:
        """Take or renew the lease; answers whether this process leads now."""
        sent, asked = local, self.wall()
        try:
            [row] = self.db.run(
                LEADER_ACQUIRE,
                role=self.role,
                holder=self.holder,
                ttl=self.ttl,
                now=now,
            )
        except QueryError as exc:
            logger.warning(
                "jobs.scheduler.lease-failed",
                extra={"holder": self.holder, "error": str(exc)},
            )
            self._next_attempt = sent + min(RETRY_AFTER_FAILURE, self.renew_every)
            return self.is_leading(local)
        self.observe_clock(row["db_now"], asked)
        was_leading = self.leading
        self.current_holder = row["holder"]
        if row["acquired"]:
            with self._lock:
                self.leading = True
                self.term = row["term"]
                self.schedules_revision = row["schedules_revision"]
                self._renewed(sent)
            if not was_leading:
                logger.info(
                    "jobs.scheduler.leading",
                    extra={"holder": self.holder, "term": self.term},
                )
            return True
        self.leading = False
        if was_leading:
            logger.warning(
                "jobs.scheduler.demoted",
                extra={"holder": self.holder, "leader": row["holder"]},
            )
        expires_in = max(float(row["expires_in"] or 0.0), 0.0)
        self._next_attempt = sent + min(self.renew_every, expires_in + EXPIRY_SLACK)
        return False

    def _renewed(self, sent: float) -> None:
        """A renewal sent at ``sent`` landed: fire until two thirds of the TTL after
        it; the next renewal is due a third after it, and this leader sends it itself
        ``grace`` later unless a poll carried it by then (at most half a third: still
        before it would stop firing)."""
        self._sent = sent
        self._valid_until = sent + self.ttl - self.renew_every
        self._renew_at = sent + self.renew_every
        grace = min(self.grace(self.renew_every), self.renew_every / 2)
        self._next_attempt = self._renew_at + grace

    def carry(self, local: float, early: float) -> bool:
        """Whether a worker's poll sent now (``local``) should renew the lease: this
        process leads, the lease is still good to fire on, and the renewal falls due
        within ``early`` seconds (runtime/rides.py)."""
        with self._lock:
            return (
                self.leading
                and local < self._valid_until
                and local + early >= self._renew_at
            )

    def renewed(self, sent: float, asked: datetime, row: Staged) -> bool:
        """What a poll that carried the renewal (sent at ``sent``, wall ``asked``)
        answered; answers whether it renewed. A lease it did not find held (it
        changed hands) makes this process ask at once."""
        with self._lock:
            if not self.leading:
                return True  # stepped down meanwhile: its own round decides
            if not row["led"]:
                self._renew_at = self._next_attempt = 0.0
                return False
            if sent <= self._sent:
                return True  # a later renewal landed meanwhile
            self._renewed(sent)
            self.schedules_revision = row["schedules_revision"]
        self.observe_clock(row["db_now"], asked)
        return True

    def observe_clock(self, db_now: datetime, asked: datetime | None = None) -> None:
        """Keep how far the database's clock is from this host's: ``db_now`` was read
        by a statement sent at ``asked`` (the midpoint of the round trip is taken)."""
        answered = self.wall()
        sent = asked if asked is not None else answered
        self.clock_offset = db_now - (sent + (answered - sent) / 2)

    def database_now(self) -> datetime:
        """The database's clock, as last observed, read on this host's."""
        return self.wall() + self.clock_offset

    def lost(self) -> None:
        """The fire statement found the lease gone: stop, and ask again at once."""
        if self.leading:
            logger.warning("jobs.scheduler.demoted", extra={"holder": self.holder})
        self.leading = False
        self._next_attempt = 0.0

    def release(self, now: datetime | None) -> bool:
        """Hand the lease back (clean stop); answers whether it was held."""
        if not self.leading:
            return False
        self.leading = False
        try:
            released = bool(
                self.db.run(
                    LEADER_RELEASE,
                    role=self.role,
                    holder=self.holder,
                    now=now,
                )
            )
        except QueryError as exc:
            logger.warning(
                "jobs.scheduler.release-failed",
                extra={"holder": self.holder, "error": str(exc)},
            )
            return False
        logger.info(
            "jobs.scheduler.released",
            extra={"holder": self.holder, "released": released},
        )
        return released


class LeaseHolder:
    """A loop that leads one role on one alias (the scheduler, the maintenance host):
    its own session, opened when first needed, and its lease on that session. The loop
    sets ``settings``, ``alias``, ``holder``, ``wall``, ``_db`` (None: open one) and
    ``_leadership`` (None) in its constructor."""

    role = SCHEDULER_ROLE
    application_name = "ultimate_jobs scheduler"
    settings: JobsSettings
    alias: str
    holder: str
    wall: Callable[[], datetime]
    _db: Database | None
    _leadership: Leadership | None

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = DirectDatabase(
                self.alias, application_name=self.application_name
            )
        return self._db

    @property
    def leadership(self) -> Leadership:
        if self._leadership is None:
            self._leadership = Leadership(
                self.db,
                holder=self.holder,
                ttl=self.settings.SCHEDULER_LEASE,
                role=self.role,
                wall=self.wall,
                grace=self.lease_grace,
            )
        return self._leadership

    def lease_grace(self, renew_every: float) -> float:
        """How long a due renewal waits for a worker's poll to carry it (0: none)."""
        return 0.0
