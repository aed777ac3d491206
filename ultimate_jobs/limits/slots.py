"""Fleet-wide concurrency slots (L1, L2): the lease keys and the lease store.

Design notes
============

``concurrency=N`` caps a job across every worker; ``Concurrency(key=..., limit=N)``
caps it per key. Both are enforced by rows every worker sees: ``ultimate_jobs_lease``
has one row per slot, ``(key, slot)`` unique, slots numbered 0 to N - 1, so at most N
rows of a key can exist and a slot is taken by exactly one claim.

Keys. ``job:<name>`` for a job cap, ``job-key:<encoded name>:<key>`` for a keyed cap
(the name percent-encoded, so no name can end where another job's key begins). The key
of a keyed cap is computed from the input at enqueue (``concurrency.key`` is a function
of the input only) and stored on the job row, ``concurrency_key``, so the claim can
decide in SQL.

Holding. A slot's ``holder`` is the claim token (``lease_owner``) of the run that took
it. The slot is HELD while its lease has not lapsed AND that token is still the token
of a running job. So a slot frees by itself when its run settles, whatever statement
settles it (completed, retried, dead, refused, suspended, cancelled, drained), and
when the run's worker dies: the heartbeat that renews the run's lease renews its slots
in the same statement, so both lapse together after ``LEASE`` (the TTL); nothing has to
clean up. After its outcome is written the worker also deletes the slot row and wakes
the queue (``lease_release``), so a run waiting for the slot starts at once.

Taking. ``job_claim`` decides at every claim, in the statement that claims:

* candidates whose key has no free slot are skipped inside the candidate scans (before
  the LIMIT), so a held key costs no write, no attempt and no busy loop: a worker whose
  only work waits on held keys sees an empty claim and backs off like an idle one,
  until a release wakes it;
* each remaining capped candidate is given the n-th free slot of its key and takes it
  with ONE ``INSERT ... ON CONFLICT (key, slot) DO UPDATE`` in (key, slot) order (so
  two claims never wait on each other in opposite orders). A slot row that is there
  but holds nothing is taken over only if its holder is still the one this claim saw
  (``taken_from``) and, when that holder's run is still running, only if the lease
  has lapsed on the row's latest version: a late heartbeat that revived it wins.
  A candidate whose slot another claim took first is simply not claimed: it stays
  ready, attempt unspent, for the next claim;
* under ``when_busy="fail"`` a candidate whose key is held by others is settled
  ``failed`` with ``X_JOB_KEY_BUSY`` by the same statement (outcome refused). A run
  never meets its own earlier claim as a holder: a claimable row is not running under
  a live token, so its leftover slot holds nothing.

Losing. A worker whose run's slot was taken over (the run's lease lapsed, then a late
heartbeat revived the run) learns it from the heartbeat, which answers how many slots
it renewed: the run's token is cancelled (``jobs.slot.lost``), as for a lost lease.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ultimate_jobs.db import Database
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)

JOB_PREFIX = "job:"
KEYED_PREFIX = "job-key:"


def job_lease_key(name: str) -> str:
    """The lease key of ``concurrency=N`` on job ``name``: ``job:<name>``."""
    return f"{JOB_PREFIX}{name}"


def keyed_lease_key(name: str, key: str) -> str:
    """The lease key of ``Concurrency(key=...)``: ``job-key:<encoded name>:<key>``."""
    return f"{KEYED_PREFIX}{quote(name, safe='')}:{key}"


@dataclass(frozen=True)
class Holder:
    """A run holding one slot of a key."""

    slot: int
    holder: uuid.UUID  # the run's claim token (Job.lease_owner)
    job_id: uuid.UUID
    acquired_at: datetime
    expires_at: datetime


class LeaseStore:
    """Reads and releases slots; taking and renewing them is in the claim and heartbeat."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def holders(self, key: str, *, now: Any = None) -> list[Holder]:
        """The runs holding slots of ``key``, in slot order (lapsed ones are not)."""
        rows = self.db.run(QUERIES["lease_holders"], key=key, now=now)
        return [Holder(**row) for row in rows]

    def release(self, holder: uuid.UUID, *, queue: str) -> int:
        """Delete the slots of one run (its claim token); wake ``queue`` if any."""
        return len(self.db.run(QUERIES["lease_release"], holder=holder, queue=queue))

    def purge(self, *, batch: int = 1000, now: Any = None) -> int:
        """Delete up to ``batch`` lapsed slot rows; answers how many."""
        return len(self.db.run(QUERIES["lease_purge"], batch=batch, now=now))


def release_slots(db: Database, row: ClaimedJob) -> None:
    """After a capped run's outcome is written: free its slot and wake its queue.

    Best effort: a failure is logged and the slot frees anyway (the settled run's
    token no longer holds it), only without the wake-up.
    """
    if row.get("lease_key") is None or row.get("lease_owner") is None:
        return
    try:
        LeaseStore(db).release(row["lease_owner"], queue=row["queue"])
    except QueryError as exc:
        logger.warning(
            "jobs.slot.release-failed",
            extra={"job_id": str(row["id"]), "error": str(exc)},
        )
