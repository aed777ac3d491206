"""Readiness (M3): are the queues keeping up, and is any worker alive?

``readiness(max_depth=..., max_lag=...)`` reads every queue's depth and lag (the age of
its oldest due job) with one grouped statement, and the live workers of the registry
(W8). It answers a ``Readiness``: not ready when a queue holds more than ``max_depth``
due jobs, when its oldest due job has waited longer than ``max_lag``, or when fewer than
``min_workers`` workers are alive. A worker that stopped deleted its registry row, and
one that died stops counting one lease after its last heartbeat, so a stopped worker
reports not ready. Slots held by bodies that ran past their timeout (S6: a thread
cannot be stopped) are lost capacity: reported as ``workers.abandoned_slots``, and a
worker whose every slot is lost does not count as alive.

``views.readiness_view(...)`` serves it at ``/health/ready`` (200 or 503);
``register_check(...)`` makes it a Django system check for ``manage.py check
--database default``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core import checks

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.observability.stats import (
    LiveWorker,
    QueueStats,
    live_workers,
    queue_health,
)

CHECK_ID = "ultimate_jobs.W070"


@dataclass(frozen=True)
class Thresholds:
    """What ready means; each limit is inclusive (depth == max_depth is ready)."""

    max_depth: int | None = None  # due jobs per queue; None: no limit
    max_lag: float | None = None  # seconds the oldest due job may wait; None: no limit
    min_workers: int = 1  # live workers required
    queues: tuple[str, ...] | None = None  # the queues to judge; None: every queue

    @classmethod
    def of(
        cls,
        *,
        max_depth: int | None = None,
        max_lag: float | timedelta | str | None = None,
        min_workers: int = 1,
        queues: Sequence[str] | None = None,
    ) -> Thresholds:
        """Checked thresholds; a bad value is InvalidArgument naming it (B1)."""
        if max_depth is not None:
            validate.whole(max_depth, field="max_depth", least=0)
        validate.whole(min_workers, field="min_workers", least=0)
        lag = None if max_lag is None else parse_duration(max_lag, field="max_lag")
        if isinstance(queues, str):
            raise InvalidArgument("queues", queues, "a list of queue names")
        names = (
            None
            if queues is None
            else tuple(validate_queue(q, field="queues") for q in queues)
        )
        return cls(max_depth, lag, min_workers, names)


@dataclass(frozen=True)
class Readiness:
    """The answer: ready or not, why not, and what was read."""

    ready: bool
    queues: tuple[QueueStats, ...]
    live_workers: int
    problems: tuple[str, ...]
    thresholds: Thresholds
    slots: int = 0  # handler threads of the live workers
    abandoned_slots: int = 0  # of them, held by bodies past their timeout
    warnings: tuple[str, ...] = ()  # lost capacity that does not fail readiness

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the body of ``/health/ready``)."""
        return {
            "ready": self.ready,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "queues": {q.queue: q.as_dict() for q in self.queues},
            "workers": {
                "live": self.live_workers,
                "slots": self.slots,
                "abandoned_slots": self.abandoned_slots,
            },
            "thresholds": {
                "max_depth": self.thresholds.max_depth,
                "max_lag": self.thresholds.max_lag,
                "min_workers": self.thresholds.min_workers,
            },
        }


def judge(
    stats: Sequence[QueueStats],
    workers: int | Sequence[LiveWorker],
    thresholds: Thresholds,
) -> Readiness:
    """Hold what was read against the thresholds. ``workers`` is the live workers
    (or their count): one whose every slot a body past its timeout holds is not live."""
    problems = []
    warnings = []
    slots = abandoned = 0
    if not isinstance(workers, int):
        for worker in workers:
            slots += worker.slots
            abandoned += worker.abandoned
            if worker.abandoned:
                warnings.append(
                    f"worker {worker.id!r}: {worker.abandoned} of {worker.slots} slot(s) "
                    "held by bodies past their timeout"
                )
        workers = sum(1 for worker in workers if worker.usable > 0)
    for queue in stats:
        if thresholds.max_depth is not None and queue.depth > thresholds.max_depth:
            problems.append(
                f"queue {queue.queue!r}: depth {queue.depth} > max_depth "
                f"{thresholds.max_depth}"
            )
        lag = queue.oldest_ready_seconds
        if thresholds.max_lag is not None and lag > thresholds.max_lag:
            problems.append(
                f"queue {queue.queue!r}: oldest due job waited {lag:.1f}s > max_lag "
                f"{thresholds.max_lag:g}s"
            )
    if workers < thresholds.min_workers:
        problems.append(
            f"{workers} live worker(s) < min_workers {thresholds.min_workers}"
        )
    # Lost slots are reported; they fail readiness only through min_workers.
    return Readiness(
        not problems,
        tuple(stats),
        workers,
        tuple(problems),
        thresholds,
        slots,
        abandoned,
        tuple(warnings),
    )


def readiness(
    *,
    max_depth: int | None = None,
    max_lag: float | timedelta | str | None = None,
    min_workers: int = 1,
    queues: Sequence[str] | None = None,
    database: Database | None = None,
    now: datetime | None = None,
) -> Readiness:
    """Read the queues and the worker registry and judge them (M3).

    ``max_depth``: due jobs a queue may hold; ``max_lag``: how long its oldest due job
    may have waited (a duration: seconds, ``timedelta``, ``"5m"``); ``min_workers``:
    live workers required (0 to judge the queues only); ``queues``: the queues to judge
    (default every queue). Raises ``QueryError`` when the database cannot be read.
    """
    thresholds = Thresholds.of(
        max_depth=max_depth, max_lag=max_lag, min_workers=min_workers, queues=queues
    )
    return check(thresholds, database=database, now=now)


def check(
    thresholds: Thresholds,
    *,
    database: Database | None = None,
    now: datetime | None = None,
) -> Readiness:
    """``readiness`` with thresholds already checked: over ``database``, or over every
    alias that holds jobs tables (Q1). A worker serving queues on several aliases is
    registered on each, under one id: it counts once."""
    if database is not None:
        dbs: list[Database] = [database]
    else:
        dbs = [DjangoDatabase(alias) for alias in get_settings().aliases]
    stats = []
    workers: dict[str, LiveWorker] = {}
    for db in dbs:
        stats += queue_health(db, queues=thresholds.queues, now=now)
        for worker in live_workers(db, now=now):
            workers.setdefault(worker.id, worker)
    stats.sort(key=lambda queue: queue.queue)
    return judge(stats, list(workers.values()), thresholds)


def register_check(
    *,
    max_depth: int | None = None,
    max_lag: float | timedelta | str | None = None,
    min_workers: int = 1,
    queues: Sequence[str] | None = None,
) -> Callable[..., list[checks.CheckMessage]]:
    """Register readiness as a Django system check (``ultimate_jobs.W070``).

    It is tagged ``database``, so it runs only when asked for the database, e.g.
    ``manage.py check --database default`` in a deploy pipeline; each problem is a
    warning (``--fail-level WARNING`` makes it fail the step).
    """
    thresholds = Thresholds.of(
        max_depth=max_depth, max_lag=max_lag, min_workers=min_workers, queues=queues
    )

    def jobs_readiness(
        app_configs: Any = None, databases: Any = None, **kwargs: Any
    ) -> list[checks.CheckMessage]:
        alias = get_settings().DATABASE
        if not databases or alias not in databases:
            return []
        answer = check(thresholds)
        return [
            checks.Warning(f"jobs not ready: {problem}", id=CHECK_ID)
            for problem in answer.problems
        ]

    checks.register(jobs_readiness, "ultimate_jobs", checks.Tags.database)
    return jobs_readiness
