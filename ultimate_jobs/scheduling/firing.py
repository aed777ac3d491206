"""The leader's cron firing (C1-C9): tasks and runtime schedules held in memory with
their watermarks, fired one occurrence per statement; the scheduler (scheduler.py)
holds the lease and runs it while it leads.

An idle round compares datetimes and reads nothing (C8). After downtime the catch-up
policy decides what fires (C5): ``skip`` the latest missed occurrence (found by
bisection), ``run-once`` the earliest (the watermark passes the rest), ``run-all`` each
one, at most ``max_catch_up`` per round.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.db import Database
from ultimate_jobs.declaration.definition import MAX_KEY_LENGTH
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.enqueue.rows import Row, array_params, build_rows
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.maintenance.leader import SCHEDULER_ROLE, Leadership
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.scheduling.cron import CronSchedule
from ultimate_jobs.scheduling.tasks import Entries, TaskRegistry, check_entries
from ultimate_jobs.sql.rows import (
    SCHEDULE_LIST,
    SCHEDULER_FIRE,
    SCHEDULER_SYNC,
    StoredSchedule,
)

logger = logging.getLogger(__name__)
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


class Firing:
    """The leader's fires: every task's and runtime schedule's watermark and next
    occurrence held in memory (C8), read in one statement each when leadership begins
    (``load``), fired per catch-up policy (C5), each occurrence in one statement
    fenced on the lease and the watermark (C4)."""

    def __init__(
        self,
        *,
        settings: JobsSettings,
        alias: str,
        holder: str,
        tasks: TaskRegistry,
        jobs: Registry,
        lifecycle: Lifecycle,
        db: Callable[[], Database],
        leadership: Callable[[], Leadership],
    ) -> None:
        self.settings = settings
        self.alias = alias
        self.holder = holder
        self.tasks = tasks
        self.jobs = jobs
        self.lifecycle = lifecycle
        self.db = db  # the scheduler's connection and lease, made at first use
        self.leadership = leadership
        self.fired = 0
        self.entries: dict[str, Entry] = {}
        self.loaded = False  # the watermarks in memory are the database's
        self.schedules: list[StoredSchedule] | None = None
        self.schedules_revision: str | None = None
        self.earliest: datetime | None = None  # nothing is due before this

    def resume(self) -> None:
        """Paused tasks were resumed: look at each again at once."""
        for entry in self.entries.values():
            entry.retry_at = None
        self.earliest = min(
            (w for e in self.entries.values() if (w := e.waits_until())),
            default=None,
        )

    def load(self, current: datetime, driven: datetime | None) -> None:
        """Read every watermark (and, when they changed, the schedules): one statement
        each, for any number of tasks."""
        if self.schedules is None:
            self.schedules_revision = self.leadership().schedules_revision
            self.schedules = self.db().run(SCHEDULE_LIST)
        entries = [self._task_entry(handle) for handle in self.tasks]
        entries += [e for row in self.schedules if (e := self._schedule_entry(row))]
        rows = self.db().run(
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
        self.entries = {entry.key: entry for entry in entries}
        self.earliest = min((e.next_due for e in entries if e.next_due), default=None)
        self.loaded = True
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

    def fire_due(self, current: datetime, driven: datetime | None) -> list[Fire]:
        fires: list[Fire] = []
        due = sorted(
            (
                e
                for e in self.entries.values()
                if (w := e.waits_until()) and w <= current
            ),
            key=lambda e: (e.next_due, e.key),
        )
        for entry in due:
            if self.lifecycle.stopping.is_set() or not self.loaded:
                break  # stop dispatching; the watermarks are the database's
            fires += self._catch_up(entry, current, driven)
        self.earliest = min(
            (w for e in self.entries.values() if (w := e.waits_until())), default=None
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
        [answer] = self.db().run(
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
            self.leadership().observe_clock(answer["db_now"])
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
            self.leadership().lost()
            self.loaded = False
        else:  # moved or missing: read the watermarks (and schedules) again
            logger.warning(
                "jobs.scheduler.watermark-moved",
                extra={
                    "task": entry.key,
                    "status": status,
                    "current": answer["current"],
                },
            )
            self.loaded = False
            self.schedules = None
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
