"""The scheduler role: fires cron tasks and runtime schedules, one leader at a time.

Every scheduler process competes for one lease (maintenance/leader.py); only the leader fires.
While it leads it holds every task's watermark in memory and the next occurrence of
each (one cron evaluation per occurrence): an idle round compares datetimes and reads
nothing (C8). The database is read when leadership begins (one statement for all
watermarks, one for the runtime schedules) and when the schedules changed (a
notification, or the revision the lease renewal answers).

An occurrence fires in ONE statement (``scheduler_fire``) that moves the watermark and
inserts the jobs, fenced on the lease and on the watermark it expects (C4). After
downtime the catch-up policy decides what fires (C5): ``skip`` the latest missed
occurrence (found by bisection), ``run-once`` the earliest (the watermark passes the
rest), ``run-all`` each one, at most ``max_catch_up`` per round.

A stop (SIGTERM, the process Lifecycle) ends the loop after the round in progress and
hands the lease back. ``run_once(now=...)`` runs one round on a driven clock, for tests.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.declaration.definition import MAX_KEY_LENGTH
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.enqueue.rows import Row, array_params, build_rows
from ultimate_jobs.ground.exceptions import JobsError, QueryError
from ultimate_jobs.maintenance.host import Maintenance
from ultimate_jobs.maintenance.leader import SCHEDULER_ROLE, Leadership
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.wake import Wake
from ultimate_jobs.scheduling.cron import CronSchedule
from ultimate_jobs.scheduling.tasks import (
    Entries,
    TaskRegistry,
    check_entries,
    task_registry,
)
from ultimate_jobs.sql.rows import (
    SCHEDULE_LIST,
    SCHEDULER_FIRE,
    SCHEDULER_SYNC,
    StoredSchedule,
)

logger = logging.getLogger(__name__)

SCHEDULER_CHANNEL = "ultimate_jobs_scheduler"
PAUSE_RECHECK = timedelta(seconds=5)  # a paused task that is due is looked at again
MAX_FAILURE_BACKOFF = 60.0  # seconds between retries of a task whose function fails


def occurrence_key(key: str, occurrence: datetime) -> str:
    """A job's idempotency key scoped to one occurrence: ``<key>@<UTC minute>``."""
    suffix = "@" + occurrence.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
    if len(key) + len(suffix) > MAX_KEY_LENGTH:  # keep it unique, and within the column
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        key = f"{key[: MAX_KEY_LENGTH - len(suffix) - 17]}~{digest}"
    return key + suffix


@dataclass(eq=False)
class Entry:
    """One task or schedule as the leader holds it."""

    key: str  # the watermark key: task:<name> or schedule:<key>
    kind: str
    name: str
    schedule: CronSchedule  # this scheduler's own: it counts evaluations
    catch_up: str
    max_catch_up: int
    entries: Callable[[datetime], Entries]
    watermark: datetime | None = None
    next_due: datetime | None = None
    retry_at: datetime | None = None
    failures: int = 0

    def waits_until(self) -> datetime | None:
        if self.next_due is None:
            return None
        return max(self.next_due, self.retry_at or self.next_due)


@dataclass(frozen=True)
class Fire:
    """One fired occurrence (what ``run_once`` answers)."""

    key: str
    occurrence: datetime
    watermark: datetime
    job_ids: list[uuid.UUID] = field(default_factory=list)  # rows inserted


class Scheduler:
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
        self.holder = holder or (
            f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        )
        self.fired = 0
        self._db = db
        self._leadership: Leadership | None = None
        self._entries: dict[str, Entry] = {}
        self._loaded = False  # the watermarks in memory are the database's
        self._schedules: list[StoredSchedule] | None = None
        self._schedules_revision: str | None = None
        self._earliest: datetime | None = None  # nothing is due before this
        # The leader's chores (archive move, counter roll-up), run on this lease.
        self.maintenance = maintenance or Maintenance(
            settings=self.settings, alias=self.alias
        )
        self._flags: set[str] = set()  # set by notifications, read by the round
        self._flags_lock = threading.Lock()
        self._nudge = threading.Event()
        self._listening = False
        self.lifecycle.on_stop(lambda reason: self._nudge.set())

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> int:
        """Compete for the lease and fire while leading, until the lifecycle stops."""
        owned = self._db is None
        if self._db is None:
            self._db = DirectDatabase(
                self.alias, application_name="ultimate_jobs scheduler"
            )
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
                    self._loaded = False  # a fire may have landed: read it back
                self._nudge.wait(self._sleep_for())
                self._nudge.clear()
        finally:
            self.leadership.release(self._now_param())
            if owned and isinstance(self._db, DirectDatabase):
                self._db.close()
            logger.info(
                "jobs.scheduler.stopped",
                extra={"holder": self.holder, "fired": self.fired},
            )
        return 0

    def stop(self) -> None:
        self.lifecycle.stop()

    def listen(self) -> None:
        """Hear the scheduler channel on the process's wake session (once)."""
        if self.notifications is not None and not self._listening:
            self._listening = True
            self.notifications.subscribe(SCHEDULER_CHANNEL, self._on_notification)
            self.notifications.start()

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = DirectDatabase(
                self.alias, application_name="ultimate_jobs scheduler"
            )
        return self._db

    @property
    def leadership(self) -> Leadership:
        if self._leadership is None:
            self._leadership = Leadership(
                self.db,
                holder=self.holder,
                ttl=self.settings.SCHEDULER_LEASE,
                wall=self.wall,
            )
        return self._leadership

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
                self._loaded = False  # another leader may have fired meanwhile
            if leadership.schedules_revision != self._schedules_revision:
                self._schedules = None
        # C9: the time of the round is the database's, read through the offset the
        # lease statement measured; the host's own clock may be wrong.
        current = driven or leadership.database_now()
        if not leadership.is_leading(local):
            if self._loaded:
                logger.warning(
                    "jobs.scheduler.stepped-down", extra={"holder": self.holder}
                )
            self._loaded = False
            return []
        if not self._loaded or self._schedules is None:
            self._load(current, driven)
            self.maintenance.begin(current)
        self.maintenance.run_due(self.db, current, driven)
        if self._earliest is None or self._earliest > current:
            return []  # idle: no cron evaluation, no statement
        return self._fire_due(current, driven)

    def _sleep_for(self) -> float:
        local = self._local(None)
        wait = min(
            self.settings.SCHEDULER_TICK,
            self.leadership.seconds_to_next_attempt(local),
        )
        if self._earliest is not None and self.leadership.is_leading(local):
            until_due = (
                self._earliest - self.leadership.database_now()
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
            self._schedules = None
        if "resume" in flags:
            for entry in self._entries.values():
                entry.retry_at = None
            self._earliest = min(
                (w for e in self._entries.values() if (w := e.waits_until())),
                default=None,
            )

    # -- loading ----------------------------------------------------------------------

    def _load(self, current: datetime, driven: datetime | None) -> None:
        """Read every watermark (and, when they changed, the schedules): one statement
        each, for any number of tasks."""
        if self._schedules is None:
            self._schedules_revision = self.leadership.schedules_revision
            self._schedules = self.db.run(SCHEDULE_LIST)
        entries = [self._task_entry(handle) for handle in self.tasks]
        entries += [e for row in self._schedules if (e := self._schedule_entry(row))]
        rows = self.db.run(
            SCHEDULER_SYNC,
            keys=[e.key for e in entries],
            kinds=[e.kind for e in entries],
            names=[e.name for e in entries],
            specs=[e.schedule.spec for e in entries],
            now=driven,
        )
        marks = {row["key"]: row["last_occurrence"] for row in rows}
        for entry in entries:
            entry.watermark = marks[entry.key]
            entry.next_due = entry.schedule.next_after(entry.watermark)
        self._entries = {entry.key: entry for entry in entries}
        self._earliest = min((e.next_due for e in entries if e.next_due), default=None)
        self._loaded = True
        logger.info(
            "jobs.scheduler.loaded",
            extra={"holder": self.holder, "entries": len(entries)},
        )

    def _task_entry(self, handle: Any) -> Entry:
        definition = handle.definition
        return Entry(
            key=definition.watermark_key,
            kind="task",
            name=definition.name,
            schedule=CronSchedule(
                definition.schedule.expression, definition.schedule.tz
            ),
            catch_up=definition.catch_up,
            max_catch_up=definition.max_catch_up,
            entries=handle.entries,
        )

    def _schedule_entry(self, row: StoredSchedule) -> Entry | None:
        try:
            schedule = CronSchedule(row["cron"], row["tz"])
            job = self.jobs.get(row["job"])
        except JobsError as exc:  # edited by hand, or a job of another release
            logger.error(
                "jobs.scheduler.schedule-skipped",
                extra={"schedule": row["key"], "error": str(exc)},
            )
            return None
        stored = row["input"]  # jsonb: text on Django's connection, a dict on psycopg's
        name, payload = (
            row["key"],
            json.loads(stored) if isinstance(stored, str) else stored,
        )
        if not isinstance(payload, dict):
            payload = {}
        return Entry(
            key=f"schedule:{name}",
            kind="schedule",
            name=name,
            schedule=schedule,
            catch_up=row["catch_up"],
            max_catch_up=row["max_catch_up"],
            entries=lambda occurrence: check_entries(name, [(job, payload)]),
        )

    # -- firing -----------------------------------------------------------------------

    def _fire_due(self, current: datetime, driven: datetime | None) -> list[Fire]:
        fires: list[Fire] = []
        due = sorted(
            (
                e
                for e in self._entries.values()
                if (w := e.waits_until()) and w <= current
            ),
            key=lambda e: (e.next_due, e.key),
        )
        for entry in due:
            if self.lifecycle.stopping.is_set() or not self._loaded:
                break  # stop dispatching; the watermarks are the database's
            fires += self._catch_up(entry, current, driven)
        self._earliest = min(
            (w for e in self._entries.values() if (w := e.waits_until())), default=None
        )
        return fires

    def _catch_up(
        self, entry: Entry, current: datetime, driven: datetime | None
    ) -> list[Fire]:
        """Fire what is due for one entry, per its catch-up policy (C5)."""
        schedule, first = entry.schedule, entry.next_due
        if first is None:
            return []
        if entry.catch_up == "run-all":
            fires: list[Fire] = []
            occurrence = first
            for _ in range(entry.max_catch_up):
                following = schedule.next_after(occurrence)
                fire = self._fire(
                    entry, occurrence, occurrence, following, current, driven
                )
                if fire is None:
                    break
                fires.append(fire)
                if following > current or self.lifecycle.stopping.is_set():
                    break
                occurrence = following
            return fires
        following = schedule.next_after(first)
        if following <= current:  # missed more than one: find the latest by bisection
            latest = schedule.latest_until(first, current)
            following = schedule.next_after(latest)
        else:
            latest = first
        occurrence = latest if entry.catch_up == "skip" else first
        fire = self._fire(entry, occurrence, latest, following, current, driven)
        return [fire] if fire is not None else []

    def _fire(
        self,
        entry: Entry,
        occurrence: datetime,
        watermark: datetime,
        following: datetime,
        current: datetime,
        driven: datetime | None,
    ) -> Fire | None:
        """Fire one occurrence in one statement; answers None when nothing fired."""
        try:
            rows = self._rows(entry, occurrence)
        except Exception as exc:  # the task's own bug must not stop the scheduler
            entry.failures += 1
            backoff = min(2.0**entry.failures, MAX_FAILURE_BACKOFF)
            entry.retry_at = current + timedelta(seconds=backoff)
            logger.error(
                "jobs.scheduler.task-failed",
                extra={
                    "task": entry.key,
                    "occurrence": occurrence.isoformat(),
                    "error": repr(exc)[:500],
                    "retry_in": backoff,
                },
            )
            return None
        [answer] = self.db.run(
            SCHEDULER_FIRE,
            role=SCHEDULER_ROLE,
            holder=self.holder,
            key=entry.key,
            expected=entry.watermark,
            watermark=watermark,
            occurrence=occurrence,
            now=driven,
            **array_params(rows),
        )
        status = answer["status"]
        if status == "fired":
            entry.watermark, entry.next_due = watermark, following
            entry.retry_at, entry.failures = None, 0
            self.fired += 1
            logger.info(
                "jobs.scheduler.fired",
                extra={
                    "task": entry.key,
                    "occurrence": occurrence.isoformat(),
                    "watermark": watermark.isoformat(),
                    "jobs": len(rows),
                    "inserted": len(answer["inserted_ids"]),
                },
            )
            return Fire(entry.key, occurrence, watermark, list(answer["inserted_ids"]))
        if status == "early":  # this host's clock ran ahead since the last reading
            self.leadership.observe_clock(answer["db_now"])
            logger.warning(
                "jobs.scheduler.clock-ahead",
                extra={
                    "task": entry.key,
                    "occurrence": occurrence.isoformat(),
                    "db_now": answer["db_now"].isoformat(),
                },
            )
        elif status == "paused":
            entry.retry_at = current + PAUSE_RECHECK
        elif status == "not-leader":
            self.leadership.lost()
            self._loaded = False
        else:  # moved or missing: read the watermarks (and schedules) again
            logger.warning(
                "jobs.scheduler.watermark-moved",
                extra={
                    "task": entry.key,
                    "status": status,
                    "current": answer["current"],
                },
            )
            self._loaded = False
            self._schedules = None
        return None

    def _rows(self, entry: Entry, occurrence: datetime) -> list[Row]:
        """The job rows of one occurrence: checked like an enqueue, keyed by it."""
        rows: list[Row] = []
        correlation = f"{entry.key}@{occurrence.astimezone(UTC).isoformat()}"[:255]
        for handle, kwargs in entry.entries(occurrence):
            for row in build_rows(handle, [kwargs]):
                if self.settings.database_for(row.queue) != self.alias:
                    # Q1: a task's rows of another alias are fired by that alias's
                    # leader. A runtime schedule is kept on its job's queue's alias
                    # (recur), so only a route changed since it was stored sends its
                    # rows elsewhere: they are fired nowhere, said loudly (call
                    # recur again to move it).
                    if entry.kind != "task":
                        logger.error(
                            "jobs.scheduler.routed-schedule",
                            extra={"task": entry.key, "queue": row.queue},
                        )
                    continue
                rows.append(
                    row._replace(
                        idempotency_key=occurrence_key(row.idempotency_key, occurrence),
                        correlation_id=correlation,
                        enqueued_by=f"scheduler {self.holder}"[:255],
                    )
                )
        return rows
