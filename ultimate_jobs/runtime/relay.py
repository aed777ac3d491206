"""The outbox relay (O2, O3, O5): publish committed outbox rows into the queue.

One pass claims a batch, publishes it, marks it published:

1. ``outbox_claim`` takes up to ``batch_size`` committed, unpublished rows in
   ``(staged_at, id)`` order with ``FOR UPDATE SKIP LOCKED`` and stamps a lease on them:
   ``claimed_at`` and a ``claimed_by`` token fresh for this pass. A bare locking SELECT
   would hold its locks only until the statement ends (autocommit), so two relays would
   read the same rows; the stamp is what makes the claim last. A row whose earlier
   pending sibling (same staging transaction) is not in the batch is left for later, so
   two relays never split one transaction (O3).
2. The batch is published with the ``job_enqueue`` statement an enqueue runs, in order,
   each row under its own pre-allocated job id and run id. An id that already names a
   job, live or finished, inserts nothing: publishing a row twice cannot create a
   second job, so a handler never runs twice BECAUSE of a re-publish (it still may
   because of a lapsed lease: handlers are at-least-once).
3. ``outbox_mark_published`` stamps ``published_at``, fenced on ``claimed_by``.

Delivery guarantees, precisely:

* A relay that dies anywhere in a pass loses nothing: its rows stay unpublished (or
  published and unmarked) and any relay takes them again once the lease (``LEASE``,
  30 s by default) lapses; the re-publish inserts nothing for rows already published.
* A failed publish stops the batch: nothing after the failure overtakes it. The whole
  batch is handed back at once (``outbox_release``), so a database blip costs one poll
  interval and not a lease.
* Release and mark are fenced on the pass's token. A relay that stalled past its lease
  wakes owning nothing: its late release cannot unclaim rows another relay is
  publishing, and its late mark cannot retire a row nobody published yet.
* What the lease does not stop: a re-publish after an operator REMOVED the job row
  (the id is free again), and a lapsed job lease re-delivering a running job.
* A row the relay cannot read (B4: a timestamp past year 9999 written by hand) never
  stops it: the claim answers the rows around it, and the pass retires that one
  unpublished (``outbox_set_aside``: ``published_at`` with the reason in ``error``),
  logs ``jobs.outbox.unreadable`` with its id and counts it in
  ``ultimate_jobs_rows_unreadable_total{table="outbox"}``.

The loop: after a pass that found rows the next pass runs at once; an empty pass waits
``RELAY_INTERVAL`` (200 ms), doubling while idle up to ``IDLE_POLL_MAX`` (or six
times ``WOKEN_IDLE_POLL_MAX``, 30 s, once the LISTEN wake is proven). Staging announces
the outbox channel on commit (O5), which ends the wait at once; unlike the job queue
the outbox holds no row due later, so a proven relay's poll only covers a lost
notification or a dead relay's lapsed batch, and polls rarely. A pass that fails is logged
``jobs.outbox.tick-failed`` and the loop re-arms with a backoff. On SIGTERM the pass in
flight finishes (publish and mark) and the loop ends.

Riding a worker's poll (N2, issue 26): in a process whose worker polls the same alias,
the worker's idle poll looks at the outbox while the relay waits idle and wakes the
relay when a row waits (runtime/rides.py); a poll that found nothing stands in for the
relay's own timed pass, which runs only once no poll has looked for the idle ceiling
(a busy worker). The NOTIFY stays the fast path (O5).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DirectDatabase, Row
from ultimate_jobs.enqueue.outbox import OUTBOX_CHANNEL
from ultimate_jobs.enqueue.rows import Row as JobRow
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.ground.ids import process_name
from ultimate_jobs.observability import metrics
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.publisher import Publisher
from ultimate_jobs.runtime.rides import Rides
from ultimate_jobs.runtime.wake import QUEUE_CHANNEL, Wake
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.sql.rows import (
    OUTBOX_CLAIM,
    OUTBOX_MARK_PUBLISHED,
    OUTBOX_RELEASE,
    OutboxId,
    StagedJob,
)

logger = logging.getLogger(__name__)
# Every staged row is announced on commit and none is due later, so a relay with a
# proven wake polls at six times the worker's woken ceiling (30 s by default).
WOKEN_RELAY_POLL_FACTOR = 6

BATCH_SIZE = 100  # rows per pass; one job_enqueue statement publishes them all


@dataclass(frozen=True)
class RelayPass:
    """What one pass did."""

    claimed: int = 0  # rows this pass took
    published: int = 0  # rows it marked published
    inserted: int = 0  # job rows the publish created (the rest were deduped)
    released: int = 0  # rows handed back after a failed publish
    set_aside: int = 0  # rows retired unpublished: Python cannot read them (B4)


def job_row(row: Row) -> JobRow:
    """The enqueue row of a claimed outbox row: same ids, run_at already resolved."""
    return JobRow(
        id=row["id"],
        run_id=row["run_id"],
        name=row["name"],
        queue=row["queue"],
        priority=row["priority"],
        input=row["input"],
        tenant_id=row["tenant_id"],
        idempotency_key=row["idempotency_key"],
        max_attempts=row["max_attempts"],
        run_at=row["run_at"],
        delay=0.0,
        correlation_id=row["correlation_id"],
        enqueued_by=row["enqueued_by"],
    )


class Relay:
    """The relay role: claim, publish, mark, until the lifecycle stops."""

    name = "relay"

    def __init__(
        self,
        *,
        settings: JobsSettings | None = None,
        lifecycle: Lifecycle | None = None,
        wake: Wake | None = None,
        relay_id: str | None = None,
        batch_size: int = BATCH_SIZE,
        db: Database | None = None,
        now: Callable[[], Any] = lambda: None,
        alias: str | None = None,
        rides: Rides | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        # Q1: the alias whose outbox this relay claims; rows of queues routed to other
        # aliases are delivered there (outbox_deliver), on connections of its own.
        self.alias = alias or self.settings.DATABASE
        self.lifecycle = lifecycle or Lifecycle()
        self.notifications = wake
        # claimed_by holds "<relay id>/<pass token>" in 200 characters
        self.relay_id = (relay_id or process_name())[:180]
        self.batch_size = batch_size
        self.db = db
        self.now = now
        self.publisher = Publisher(
            self.settings, alias=self.alias, relay_id=self.relay_id, now=now
        )
        self.published = 0
        self._wake = threading.Event()
        self.lifecycle.on_stop(lambda reason: self._wake.set())
        # N2 (issue 26): while this relay waits idle, its process's worker polling the
        # same alias looks at the outbox in its own poll (runtime/rides.py): ``idle``
        # asks it to, ``polled`` hears that it found nothing, ``wake`` that it did.
        self.idle = False
        self._polled_at = float("-inf")  # monotonic time the last such poll was sent
        self._ride = rides.of(self.alias) if rides is not None else None
        if self._ride is not None:
            self._ride.relay = self

    # -- the loop ----------------------------------------------------------------

    def run(self) -> int:
        """Relay until the lifecycle stops; the pass in flight always finishes."""
        logger.info(
            "jobs.relay.started", extra={"relay_id": self.relay_id, "alias": self.alias}
        )
        if self.notifications is not None:
            self.notifications.subscribe(OUTBOX_CHANNEL, self._on_notification)
            self.notifications.start()
        owned = self.db is None
        db = self.db or self.source()
        try:
            self._loop(db)
        finally:
            if owned and isinstance(db, DirectDatabase):
                db.close()
            self.close()
            logger.info(
                "jobs.relay.stopped",
                extra={"relay_id": self.relay_id, "published": self.published},
            )
        return 0

    def _loop(self, db: Database) -> None:
        interval = self.settings.RELAY_INTERVAL
        idle = interval
        failures = 0
        while not self.lifecycle.stopping.is_set():
            passed_at = time.monotonic()
            try:
                done = self.run_once(db)
            except Exception as exc:
                failures += 1
                pause = min(interval * 2 ** min(failures, 5), 5.0)
                logger.warning(
                    "jobs.outbox.tick-failed",
                    extra={
                        "relay_id": self.relay_id,
                        "error": str(exc),
                        "retry_in": pause,
                    },
                )
                self.lifecycle.wait(pause)
                continue
            failures = 0
            if done.claimed:
                idle = interval
                continue  # there may be more: pass again at once
            self._wait_idle(idle, passed_at)
            idle = min(idle * 2, self.idle_ceiling())

    def _wait_idle(self, seconds: float, passed_at: float) -> None:
        """Wait ``seconds`` after an empty pass that began at ``passed_at``, or until
        woken. A worker's poll that looked at the outbox since and found nothing
        stands in for the next pass: the wait goes on until no poll has looked for
        the idle ceiling (N2, runtime/rides.py)."""
        self.idle = True
        try:
            while not self._wake.wait(seconds):
                if self.lifecycle.stopping.is_set() or self._polled_at <= passed_at:
                    return
                passed_at = self._polled_at
                seconds = max(passed_at + self.idle_ceiling() - time.monotonic(), 0.001)
            self._wake.clear()
        finally:
            self.idle = False

    def polled(self, sent_at: float) -> None:
        """A worker's poll sent at monotonic ``sent_at`` found no row to claim."""
        self._polled_at = max(self._polled_at, sent_at)

    def _on_notification(self, payload: str) -> None:
        self.wake()

    def wake(self) -> None:
        """Pass now rather than at the next poll."""
        self._wake.set()

    def idle_ceiling(self) -> float:
        """The idle poll ceiling: much longer once the LISTEN wake is proven (N1)."""
        if self.notifications is not None and self.notifications.proven.is_set():
            return WOKEN_RELAY_POLL_FACTOR * self.settings.WOKEN_IDLE_POLL_MAX
        return self.settings.IDLE_POLL_MAX

    # -- one pass ----------------------------------------------------------------

    def run_once(self, db: Database | None = None) -> RelayPass:
        """Claim a batch, publish it in order, mark it published; answer what it did.

        A failed publish releases the whole batch at once and raises.
        """
        db = db or self.db
        if db is None:
            raise RuntimeError("Relay.run_once needs a database (db=...)")
        token = f"{self.relay_id}/{uuid.uuid4().hex[:12]}"
        rows = self.claim(db, token)
        set_aside = self.set_aside(db, token)
        if not rows:
            return RelayPass(claimed=set_aside, set_aside=set_aside)
        if self.lifecycle.abandoning.is_set():
            released = self.release(db, rows, token)
            return RelayPass(claimed=len(rows), released=released)
        try:
            inserted, queues = self.publisher.publish(db, rows)
        except Exception as exc:
            released = self.release(db, rows, token)
            logger.error(
                "jobs.outbox.publish-failed",
                extra={
                    "relay_id": self.relay_id,
                    "claimed_by": token,
                    "first_id": str(rows[0]["id"]),
                    "rows": len(rows),
                    "released": released,
                    "error": str(exc),
                },
            )
            raise
        if self.notifications is not None:
            # A worker in this process starts at once; others hear job_enqueue's NOTIFY.
            for queue in sorted(queues):
                self.notifications.announce_local(QUEUE_CHANNEL, queue)
        published = self.mark_published(db, rows, token)
        self.published += published
        logger.info(
            "jobs.outbox.published",
            extra={
                "relay_id": self.relay_id,
                "claimed": len(rows),
                "inserted": inserted,
                "published": published,
            },
        )
        return RelayPass(
            claimed=len(rows) + set_aside,
            published=published,
            inserted=inserted,
            set_aside=set_aside,
        )

    def source(self) -> DirectDatabase:
        """The session on this relay's own alias. Its commits are synchronous whatever
        the server's default (issue 31): the claim's commit flushes the WAL past every
        transaction whose staged rows it took, so no job is delivered for a business
        transaction a crash could still lose, and the mark that drops a staged row is
        durable only after the target's insert (also synchronous, ``deliver``) is."""
        return DirectDatabase(
            self.alias,
            application_name=f"ultimate_jobs relay {self.relay_id}"[:63],
            synchronous_commit=True,
        )

    def close(self) -> None:
        """Close the connections this relay opened to the other aliases (Q1)."""
        self.publisher.close()

    def claim(self, db: Database, token: str) -> list[StagedJob]:
        """Take the next batch under the pass's token; rows in publish order."""
        return db.run(
            OUTBOX_CLAIM,
            limit=self.batch_size,
            lease_seconds=self.settings.LEASE,
            claimed_by=token,
            now=self.now(),
        )

    def set_aside(self, db: Database, token: str) -> int:
        """Retire the rows the last claim could not read, unpublished (B4)."""
        unreadable = list(getattr(db, "unreadable", ()))
        if not unreadable:
            return 0
        ids = [row.id for row in unreadable]
        errors = [f"X_ROW_UNREADABLE: {row.error}" for row in unreadable]
        retired = db.run(
            QUERIES["outbox_set_aside"],
            ids=ids,
            errors=errors,
            claimed_by=token,
            now=self.now(),
        )
        metrics.row_unreadable("outbox", len(unreadable))
        logger.error(
            "jobs.outbox.unreadable",
            extra={
                "relay_id": self.relay_id,
                "ids": ids[:20],
                "retired": len(retired),
                "error": errors[0][:300],
            },
        )
        return len(unreadable)

    def mark_published(self, db: Database, rows: list[StagedJob], token: str) -> int:
        """Stamp published_at on the rows this pass still owns; answer how many."""
        marked = db.run(
            OUTBOX_MARK_PUBLISHED,
            ids=[row["id"] for row in rows],
            claimed_by=token,
            now=self.now(),
        )
        if len(marked) < len(rows):
            self._unowned("mark", rows, marked)
        return len(marked)

    def release(self, db: Database, rows: list[StagedJob], token: str) -> int:
        """Hand the rows this pass still owns back at once; answer how many."""
        try:
            released = db.run(
                OUTBOX_RELEASE,
                ids=[row["id"] for row in rows],
                claimed_by=token,
            )
        except QueryError as exc:
            logger.warning(
                "jobs.outbox.release-failed",
                extra={"relay_id": self.relay_id, "error": str(exc)},
            )
            return 0  # the lease hands them back instead
        if len(released) < len(rows):
            self._unowned("release", rows, released)
        return len(released)

    def _unowned(
        self, write: str, rows: list[StagedJob], landed: list[OutboxId]
    ) -> None:
        # The lease lapsed and another relay took these rows: this write was a no-op.
        kept = {r["id"] for r in landed}
        logger.warning(
            "jobs.outbox.unowned",
            extra={
                "relay_id": self.relay_id,
                "write": write,
                "ids": [str(r["id"]) for r in rows if r["id"] not in kept][:20],
            },
        )
