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
    """The targets of the app's hourly purge, built from the current settings."""
    settings = get_settings()
    db = DjangoDatabase(settings.DATABASE)
    keep_outbox = settings.OUTBOX_RETENTION

    def left(query: str) -> Callable[[datetime], int]:
        return lambda now: _one(db, query, "left", now=now, bound=LEFT_BOUND)

    return [
        ExpiredRows(
            "events",
            lambda batch, now: purge_expired_events(batch, now=now),
            left("event_purge_left"),
            settings,
        ),
        ExpiredRows(
            "outbox",
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
        JobRetention(db, settings=settings),
        ExpiredRows(
            "workers",
            lambda batch, now: _one(
                db, "worker_purge", "deleted", batch=batch, now=now
            ),
            left("worker_purge_left"),
            settings,
        ),
        ExpiredRows(
            "leases",
            lambda batch, now: LeaseStore(db).purge(batch=batch, now=now),
            left("lease_purge_left"),
            settings,
        ),
    ]
