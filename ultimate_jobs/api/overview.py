"""The numbers of the operator console (P7): per queue, what waits, runs and died, and
what the queue did over the last hour and day.

``overview()`` answers every known queue (declared by a job, named in the ``QUEUES``
setting, seen on a live or dead row, or paused) with its jobs per watched state, its
depth and oldest due age (as the metrics report them, M1), whether and by whom it is
paused, and its throughput and failure rate over the last hour and day with 24 hourly
points, all from the per-job counters (P5) that the settle statements move. It reads
the live rows and dead letters through the state indexes and the counters' last day,
never the finished rows, so it stays fast on a million-row table. With queues on
several aliases (Q1) every alias is read and each queue says which alias holds it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from ultimate_jobs.conf import get_settings, reading_aliases
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.models import CounterTier, Job, JobCounter, QueuePause
from ultimate_jobs.sql.rows import QUEUE_OVERVIEW

WATCHED = ("ready", "delayed", "running", "suspended", "dead")
HOURS = 24


def declared_queues() -> set[str]:
    """The queues this deploy declares: its jobs' queues and the QUEUES setting."""
    return set(registry.queues()) | set(get_settings().QUEUES)


def _queue_of(names: set[str], alias: str) -> dict[str, str]:
    """The queue of each job name: its declaration, else the newest row's queue."""
    found = {n: registry.get(n).definition.queue for n in names if n in registry}
    for name in names - found.keys():
        # Any row of the name will do: no ORDER BY, so the (name, ...) index answers
        # at once, also for a name none of whose rows is left.
        rows = list(
            Job.objects.using(alias)
            .filter(name=name)
            .order_by()
            .values_list("queue", flat=True)[:1]
        )
        found[name] = rows[0] if rows else "?"
    return found


def _empty(queue: str, declared: set[str]) -> dict[str, Any]:
    return {
        "queue": queue,
        "database": get_settings().database_for(queue),
        "declared": queue in declared,
        "states": dict.fromkeys(WATCHED, 0),
        "depth": 0,
        "oldest_ready_seconds": 0.0,
        "paused": None,
        "hour": {"done": 0, "failed": 0, "failure_rate": None},
        "day": {"done": 0, "failed": 0, "failure_rate": None},
        "series": [{"done": 0, "failed": 0} for _ in range(HOURS)],
    }


def _rate(done: int, failed: int) -> float | None:
    return failed / (done + failed) if done + failed else None


def overview(now: datetime | None = None) -> dict[str, Any]:
    """Every known queue's numbers, sorted by name, and the hours of the series."""
    declared = declared_queues()
    queues: dict[str, dict[str, Any]] = {}

    def entry(queue: str) -> dict[str, Any]:
        return queues.setdefault(queue, _empty(queue, declared))

    for queue in declared:
        entry(queue)
    clock = now if now is not None else timezone.now()
    for alias in reading_aliases():  # Q1: every alias that holds jobs tables
        for row in DjangoDatabase(alias).run(QUEUE_OVERVIEW, now=now):
            found = entry(row["queue"])
            found["states"][row["state"]] += row["jobs"]
            found["depth"] += row["due"]
            if row["oldest_due_seconds"] is not None:
                found["oldest_ready_seconds"] = max(
                    found["oldest_ready_seconds"], float(row["oldest_due_seconds"])
                )
        for pause in QueuePause.objects.using(alias).order_by("queue"):
            entry(pause.queue)["paused"] = {
                "by": pause.paused_by,
                "at": pause.paused_at.isoformat(),
            }
        hours = _count_hours(alias, clock, entry)
    for found in queues.values():
        done = sum(p["done"] for p in found["series"])
        failed = sum(p["failed"] for p in found["series"])
        found["day"] = {
            "done": done,
            "failed": failed,
            "failure_rate": _rate(done, failed),
        }
    return {"queues": [queues[q] for q in sorted(queues)], "hours": hours}


def _sums(rows: Any) -> Any:
    return rows.annotate(
        done_sum=Sum("done"),
        retried_sum=Sum("retried"),
        failed_sum=Sum("failed"),
        dead_sum=Sum("dead"),
    )


def _count_hours(alias: str, now: datetime, entry: Any) -> list[str]:
    """Fill each queue's 24 hourly points and its last 60 minutes from the 1-minute
    counters (P5); answers the hours, oldest first (the last one is the current,
    partial hour). A failure is an attempt that did not complete: retried, dropped,
    refused or dead-lettered, as ``ultimate_jobs_jobs_total`` counts them (M1)."""
    minutes = JobCounter.objects.using(alias).filter(tier=CounterTier.MINUTE)
    last = now.replace(minute=0, second=0, microsecond=0)
    first = last - timedelta(hours=HOURS - 1)
    by_hour = list(
        _sums(
            minutes.filter(bucket__gte=first)
            .annotate(hour=TruncHour("bucket", tzinfo=UTC))
            .values("name", "hour")
        )
    )
    past_hour = list(
        _sums(minutes.filter(bucket__gt=now - timedelta(hours=1)).values("name"))
    )
    queue_of = _queue_of({r["name"] for r in by_hour}, alias)
    for row in by_hour:
        index = int((row["hour"] - first).total_seconds() // 3600)
        if 0 <= index < HOURS:
            point = entry(queue_of[row["name"]])["series"][index]
            point["done"] += row["done_sum"]
            point["failed"] += row["retried_sum"] + row["failed_sum"] + row["dead_sum"]
    for row in past_hour:
        window = entry(queue_of.get(row["name"], "?"))["hour"]
        window["done"] += row["done_sum"]
        window["failed"] += row["retried_sum"] + row["failed_sum"] + row["dead_sum"]
        window["failure_rate"] = _rate(window["done"], window["failed"])
    return [(first + timedelta(hours=h)).isoformat() for h in range(HOURS)]
