"""Per-job counters (P5): what each job's attempts did, by time bucket.

The settle statements move them (sql/jobs.sql), so a count never disagrees with the
rows; ``rollup()`` folds ageing buckets into wider ones (the scheduler leader calls it
every five minutes, maintenance/rollup.py); ``totals()`` answers the admin, ``manage.py jobs counters`` and
dashboards: per job, done / retried / failed / dead and the mean duration since a time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.durations import Duration, parse_duration
from ultimate_jobs.sql import QUERIES


def rollup(
    db: Database | None = None, *, now: datetime | None = None
) -> dict[str, int]:
    """Fold 1-minute buckets past 24 h into 5-minute ones, 5-minute past 7 days into
    hours, drop hours past 30 days; answers how many rows moved."""
    database = db or DjangoDatabase(get_settings().DATABASE)
    [row] = database.run(QUERIES["counter_rollup"], now=now)
    return {key: int(value) for key, value in row.items()}


def totals(
    *,
    since: Duration | datetime = "1h",
    name: str | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Per job name since a time (``"1h"``, ``"1d"``, a timedelta or an aware datetime)."""
    if isinstance(since, datetime):
        start = since
    else:
        start = (now or timezone.now()) - timedelta(
            seconds=parse_duration(since, field="since")
        )
    if name is not None:  # B4: refused before the statement (issue 31)
        check_text(name, field="name", max_length=200)
    rows = DjangoDatabase(get_settings().DATABASE).run(
        QUERIES["counter_totals"], since=start, name=name
    )
    out = []
    for row in rows:
        ran = row["done"] + row["retried"] + row["failed"] + row["dead"]
        out.append(
            {
                "name": row["name"],
                "done": row["done"],
                "retried": row["retried"],
                "failed": row["failed"],
                "dead": row["dead"],
                "mean_duration": row["duration"] / ran if ran else None,
            }
        )
    return out
