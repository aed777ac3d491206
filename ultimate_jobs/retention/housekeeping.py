"""The app's own purge targets: what the hourly purge of jobs.py trims (F3, F6).

* ``events``: published events past their expiry (S4; ``EVENT_RETENTION``);
* ``outbox``: outbox rows published more than ``OUTBOX_RETENTION`` ago (O5);
* ``jobs``: finished jobs past their retention, with their steps and leases (F6);
* ``workers``: worker registry rows whose expiry passed (W8);
* ``leases``: concurrency slots whose lease lapsed (L1).

Each deletes in batches of ``PURGE_BATCH`` rows, at most ``PURGE_MAX_BATCHES``
statements per pass, and logs ``jobs.purge.capped`` with what is left when it stops
there. ``app_targets()`` is read at every attempt of the purge, so the settings of the
process that runs it apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.durable.events import purge_expired_events
from ultimate_jobs.limits.slots import LeaseStore
from ultimate_jobs.retention.jobs import JobRetention
from ultimate_jobs.retention.purge import LEFT_BOUND, PurgeTarget, delete_in_batches
from ultimate_jobs.sql import QUERIES


@dataclass(frozen=True)
class ExpiredRows:
    """A target over one table: a bounded delete of rows expired at ``now``, and the
    count of what it still matches."""

    name: str
    delete: Callable[[int, datetime], int]  # (batch, now) -> rows removed
    left: Callable[[datetime], int]  # now -> rows it still matches (bounded)
    settings: JobsSettings

    def purge_expired(self, now: datetime) -> int:
        return delete_in_batches(
            self.name,
            [lambda batch: self.delete(batch, now)],
            left=lambda: self.left(now),
            batch=self.settings.PURGE_BATCH,
            max_batches=self.settings.PURGE_MAX_BATCHES,
        )


def _one(db: Database, query: str, column: str, **params: Any) -> int:
    [row] = db.run(QUERIES[query], **params)
    return int(row[column])


def app_targets() -> list[PurgeTarget]:
    """The targets of the app's hourly purge, built from the current settings: those of
    DATABASE, then (Q1) the same on every alias a queue is routed to, named
    ``<target>@<alias>``, and the delivery receipts of every alias."""
    settings = get_settings()
    targets = _targets_on(settings, settings.DATABASE)
    if len(settings.aliases) > 1:
        targets.insert(2, _receipts(settings, settings.DATABASE, ""))
        for alias in settings.aliases[1:]:
            targets += _targets_on(settings, alias)
            targets.append(_receipts(settings, alias, f"@{alias}"))
    return targets


def _receipts(settings: JobsSettings, alias: str, suffix: str) -> PurgeTarget:
    db = DjangoDatabase(alias)
    keep = settings.OUTBOX_RETENTION
    return ExpiredRows(
        f"receipts{suffix}",
        lambda batch, now: _one(
            db, "receipt_purge", "deleted", batch=batch, now=now, keep_seconds=keep
        ),
        lambda now: _one(
            db,
            "receipt_purge_left",
            "left",
            now=now,
            keep_seconds=keep,
            bound=LEFT_BOUND,
        ),
        settings,
    )


def _targets_on(settings: JobsSettings, alias: str) -> list[PurgeTarget]:
    """The app's targets over one alias's tables (each alias has its own events)."""
    db = DjangoDatabase(alias)
    suffix = "" if alias == settings.DATABASE else f"@{alias}"
    keep_outbox = settings.OUTBOX_RETENTION

    def left(query: str) -> Callable[[datetime], int]:
        return lambda now: _one(db, query, "left", now=now, bound=LEFT_BOUND)

    jobs = JobRetention(db, settings=settings)
    jobs.name = f"jobs{suffix}"
    return [
        ExpiredRows(
            f"events{suffix}",
            lambda batch, now: purge_expired_events(batch, now=now, alias=alias),
            left("event_purge_left"),
            settings,
        ),
        ExpiredRows(
            f"outbox{suffix}",
            lambda batch, now: _one(
                db,
                "outbox_purge_published",
                "deleted",
                batch=batch,
                now=now,
                keep_seconds=keep_outbox,
            ),
            lambda now: _one(
                db,
                "outbox_purge_published_left",
                "left",
                now=now,
                keep_seconds=keep_outbox,
                bound=LEFT_BOUND,
            ),
            settings,
        ),
        jobs,
        ExpiredRows(
            f"workers{suffix}",
            lambda batch, now: _one(
                db, "worker_purge", "deleted", batch=batch, now=now
            ),
            left("worker_purge_left"),
            settings,
        ),
        ExpiredRows(
            f"leases{suffix}",
            lambda batch, now: LeaseStore(db).purge(batch=batch, now=now),
            left("lease_purge_left"),
            settings,
        ),
    ]
