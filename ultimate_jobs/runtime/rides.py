"""What an idle worker's poll carries for the other roles of its process (N2, issue 26).

An idle worker polls once per idle ceiling (``WOKEN_IDLE_POLL_MAX``, 5 s, once its wake
is proven) with one statement, the staging pass ``job_stage``. The scheduler and the
relay of the same process, on the same alias (Q1), ride that statement instead of
sending statements of their own:

* The scheduler's leader lease (C3). A leader renews every third of the TTL; once a
  renewal falls due within half a poll (at most half a third of the TTL), the poll
  carries it (``led``: renewed, fenced on this holder and on a lease that has not
  lapsed). The leader itself renews only ``grace`` after the renewal fell due: the
  worker's poll ceiling, at most half a third of the TTL (5 s). So while polls come on
  time the scheduler sends no ``leader_acquire``; when they do not (the worker is busy
  with every slot taken, its polls are late, no worker serves the alias) it renews on
  its own at most half a third of the TTL late: at 15 s of a 30 s lease, 5 s before it
  would stop firing (20 s) and 15 s before a standby could take the lease (30 s). A
  carried renewal counts from the moment the poll was SENT, like the leader's own
  (maintenance/leader.py). A renewal the poll could not make (the lease changed hands)
  makes the leader ask at once.
* The relay's idle poll (O2, O5). Staging announces every outbox row on commit, so the
  relay's timed poll only covers a lost notification or a dead relay's lapsed batch.
  While the relay waits idle, the poll also answers whether a row ``outbox_claim``
  would take waits (``outbox``): if so the relay is woken and claims; if not, the poll
  stands in for the relay's own timed pass, which runs only once no poll has checked
  for the relay's ceiling (a busy worker). The NOTIFY stays the fast path.

A standby scheduler (not leading) still asks on its own: taking the lease is
``leader_acquire``'s alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.sql.rows import Staged


class Leader(Protocol):
    """A lease a poll may renew (maintenance/leader.py Leadership)."""

    role: str
    holder: str
    ttl: float
    renew_every: float

    def carry(self, local: float, early: float) -> bool: ...

    def renewed(self, sent: float, asked: datetime, row: Staged) -> bool: ...


class IdleRelay(Protocol):
    """A relay whose idle poll a worker's poll may stand in for (relay.py Relay)."""

    idle: bool
    settings: JobsSettings

    def wake(self) -> None: ...

    def polled(self, sent_at: float) -> None: ...


# The job_stage parameters of a poll that carries nothing for the other roles.
NO_RIDE: dict[str, Any] = {
    "leader_role": None,
    "leader_holder": None,
    "leader_ttl": None,
    "outbox_lease": None,
}


class Ride:
    """One alias's poll and what rides it: a leader's lease, a relay's idle poll."""

    def __init__(self) -> None:
        self.horizon: Callable[[], float] | None = None  # the worker's next-poll bound
        self.leadership: Callable[[], Leader | None] = lambda: None
        self.on_lost: Callable[[], None] = lambda: None  # the scheduler's nudge
        self.relay: IdleRelay | None = None
        self._lock = threading.Lock()
        self._lead: tuple[Leader, float, datetime] | None = None  # carried now
        self._relay_asked = False

    def grace(self, renew_every: float) -> float:
        """How long past a due renewal the leader waits for a poll to carry it: the
        poll ceiling, at most half a renewal period; 0 when no worker polls here."""
        if self.horizon is None:
            return 0.0
        return min(self.horizon(), renew_every / 2)

    def params(self) -> dict[str, Any]:
        """The job_stage parameters of the next poll: what it carries."""
        params = dict(NO_RIDE)
        lead = self.leadership()
        horizon = self.horizon() if self.horizon is not None else 0.0
        sent = time.monotonic()
        carried: tuple[Leader, float, datetime] | None = None
        if lead is not None and lead.carry(sent, min(horizon, lead.renew_every) / 2):
            carried = (lead, sent, datetime.now(UTC))
            params.update(leader_role=lead.role, leader_holder=lead.holder)
            params["leader_ttl"] = lead.ttl
        relay = self.relay
        asked = relay is not None and relay.idle
        if relay is not None and asked:
            params["outbox_lease"] = relay.settings.LEASE
        with self._lock:
            self._lead, self._relay_asked = carried, asked
        return params

    def answered(self, sent_at: float, row: Staged) -> None:
        """What the poll (sent at monotonic ``sent_at``) answered for its riders."""
        with self._lock:
            carried, asked = self._lead, self._relay_asked
            self._lead, self._relay_asked = None, False
        if carried is not None:
            lead, sent, asked_wall = carried
            if not lead.renewed(sent, asked_wall, row):
                self.on_lost()
        relay = self.relay
        if asked and relay is not None:
            if row["outbox"]:
                relay.wake()
            else:
                relay.polled(sent_at)


class Rides:
    """A process's rides, one per alias (Q1): the roles find each other here."""

    def __init__(self) -> None:
        self._rides: dict[str, Ride] = {}
        self._lock = threading.Lock()

    def of(self, alias: str) -> Ride:
        with self._lock:
            return self._rides.setdefault(alias, Ride())
