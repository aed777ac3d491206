"""Prometheus metrics (M1), in prometheus_client's default registry from the moment
prometheus_client is in the process (registered.py holds the series).

Two kinds:

* Counters and histograms the worker records as it goes: ``ultimate_jobs_jobs_total``
  (one per attempt, by outcome), ``ultimate_jobs_job_duration_seconds``,
  ``ultimate_jobs_leases_lost_total``, ``ultimate_jobs_claim_seconds``,
  ``ultimate_jobs_rows_unreadable_total`` (rows skipped because Python cannot read
  them) and ``ultimate_jobs_bodies_abandoned_total`` (bodies past their timeout).
* Queue gauges computed by ``QueueCollector`` at scrape time with one grouped
  statement (``queue_health``): ``ultimate_jobs_queue_depth``,
  ``ultimate_jobs_queue_oldest_ready_seconds``, ``ultimate_jobs_queue_running``,
  ``ultimate_jobs_queue_dead_jobs`` (the hot table's and the archive's dead letters) and
  ``ultimate_jobs_queue_oldest_dead_seconds``. Any process that exports the default registry
  (this package's ``/metrics`` view, django-prometheus's, ``jobs_worker
  --metrics-port``) serves them.

Label sets are bounded: ``job`` is a name from the registry of declared jobs (a row
naming an undeclared job is counted under ``(unregistered)``), never input; ``queue``
comes from declarations and enqueue options; ``outcome`` from the fixed list of W9
plus ``unowned``. Serving the metrics over HTTP is exposition.py's job.

A process that never imports prometheus_client (a ``jobs_worker`` without
``--metrics-port``, in a project that exports nothing: no scraper can read it) does not
load it for this package either (N2's RSS: 1.2 MiB and 30 modules): the worker's
counts are kept here in plain tallies, and ``watch`` (apps.py) registers the series
the moment anything imports prometheus_client (django-prometheus, this package's
``/metrics`` view, ``--metrics-port``, the app's own exporter), adding the tallies so
far. A process that had imported it before the app was ready, or runs in
prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``), registers them
when the app is ready, as before. Either way every exporter of the default registry
serves the same series with the same counts.
"""

from __future__ import annotations

import bisect
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.observability.stats import queue_health
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)

UNREGISTERED = "(unregistered)"
# The write of an attempt's outcome was fenced out (W3): its lease was lost, an
# operator cancelled it, or another worker reclaimed it. Whoever settles the row next
# counts its real ending.
UNOWNED = "unowned"
OUTCOMES = (
    "completed",
    "suspended",
    "retried",
    "dead-lettered",
    "dropped",
    "interrupted",
    "refused",
    "rescheduled",
    UNOWNED,
)

# Jobs run from milliseconds to an hour; the default buckets stop at 10 s.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
)
# One claim statement: a healthy one takes about a millisecond.
CLAIM_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)

# What registered.py defines, answered through it (module ``__getattr__``).
SERIES = frozenset(
    {
        "JOBS",
        "JOB_DURATION",
        "LEASES_LOST",
        "ROWS_UNREADABLE",
        "BODIES_ABANDONED",
        "CLAIM_SECONDS",
        "QUEUE_COLLECTOR",
    }
)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_lock = threading.Lock()
_live: ModuleType | None = None  # registered.py, once prometheus_client is here
# The tallies before then: counters by label values; histograms as the count per
# bucket (the last one past the highest bound) and the sum, by label values.
_counts: dict[tuple[str, tuple[str, ...]], float] = {}
_histograms: dict[tuple[str, tuple[str, ...]], tuple[list[int], list[float]]] = {}


def job_label(name: str, jobs: Registry = registry) -> str:
    """The ``job`` label of a row: its declared name, never anything else."""
    return name if name in jobs else UNREGISTERED


def _count(series: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
    key = (series, labels)
    _counts[key] = _counts.get(key, 0.0) + amount


def _observe(
    series: str, labels: tuple[str, ...], bounds: Sequence[float], value: float
) -> None:
    buckets, total = _histograms.setdefault(
        (series, labels), ([0] * (len(bounds) + 1), [0.0])
    )
    buckets[bisect.bisect_left(bounds, value)] += 1  # the first bound >= value
    total[0] += value


def attempt_finished(
    job: ClaimedJob, outcome: str, duration: float, *, jobs: Registry = registry
) -> None:
    """Count one attempt's outcome and observe its duration."""
    attempts_finished(job["queue"], job["name"], outcome, (duration,), jobs=jobs)


def attempts_finished(
    queue: str,
    name: str,
    outcome: str,
    durations: Sequence[float],
    *,
    jobs: Registry = registry,
) -> None:
    """Count many attempts of one job name and outcome at once (a batch of
    completions, N2): one counter update for all, each duration observed."""
    labels = (queue, job_label(name, jobs))
    if _live is None:
        with _lock:
            if _live is None:
                _count("JOBS", (*labels, outcome), len(durations))
                for duration in durations:
                    _observe(
                        "JOB_DURATION", labels, DURATION_BUCKETS, max(duration, 0.0)
                    )
                return
    count, histogram = _live.outcome_series(*labels, outcome)
    count.inc(len(durations))
    observe = histogram.observe
    for duration in durations:
        observe(max(duration, 0.0))


def job_buried(job: ClaimedJob, *, jobs: Registry = registry) -> None:
    """Count a job the claim itself buried (W5: lease lapsed on the final attempt):
    dead-lettered, or dropped for a job declared ``dead_letter=False``."""
    outcome = "dead-lettered" if job["state"] == "dead" else "dropped"
    _inc("JOBS", (job["queue"], job_label(job["name"], jobs), outcome))


def lease_lost(queue: str) -> None:
    _inc("LEASES_LOST", (queue,))


def row_unreadable(table: str, count: int = 1) -> None:
    """Count stored rows a reader skipped (B4); ``table`` is one of the app's."""
    _inc("ROWS_UNREADABLE", (table,), count)


def body_abandoned(queue: str, name: str, *, jobs: Registry = registry) -> None:
    """Count a body that ran past its timeout and kept its thread (S6)."""
    _inc("BODIES_ABANDONED", (queue, job_label(name, jobs)))


def claim_finished(seconds: float) -> None:
    seconds = max(seconds, 0.0)
    if _live is None:
        with _lock:
            if _live is None:
                _observe("CLAIM_SECONDS", (), CLAIM_BUCKETS, seconds)
                return
    _live.CLAIM_SECONDS.observe(seconds)


def _inc(series: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
    if _live is None:
        with _lock:
            if _live is None:
                _count(series, labels, amount)
                return
    getattr(_live, series).labels(*labels).inc(amount)


class QueueCollector:
    """Queue gauges, computed at scrape time with one grouped statement.

    Every queue a job declares (and every queue of the ``QUEUES`` setting) is reported,
    at 0 when it holds nothing, so a drained queue reads 0 rather than vanishing. With
    queues routed to several aliases (Q1) each alias is read for its own queues; a
    queue lives on one alias, so its name stays the only label. A
    failed read is logged (``jobs.metrics.collect-failed``) and leaves the gauges out
    of that scrape; the rest of the scrape is served.
    """

    def __init__(self, database: Database | None = None) -> None:
        self.database = database

    def describe(self) -> Iterator[Any]:
        # Registration asks for the names: answer them without touching the database.
        yield from self._families()

    def collect(self) -> Iterator[Any]:
        settings = get_settings()
        known = [*registry.queues(), *settings.QUEUES]
        if self.database is not None:
            where = [(self.database, known)]
        else:  # Q1: every alias, each reporting the known queues that live there
            where = [
                (
                    DjangoDatabase(alias),
                    [q for q in known if settings.database_for(q) == alias],
                )
                for alias in settings.aliases
            ]
        try:
            stats = [s for db, names in where for s in queue_health(db, known=names)]
        except QueryError as exc:
            logger.warning("jobs.metrics.collect-failed", extra={"error": str(exc)})
            return
        depth, oldest, running, dead, oldest_dead = self._families()
        for queue in stats:
            depth.add_metric([queue.queue], queue.depth)
            oldest.add_metric([queue.queue], queue.oldest_ready_seconds)
            running.add_metric([queue.queue], queue.running)
            dead.add_metric([queue.queue], queue.dead)
            oldest_dead.add_metric([queue.queue], queue.oldest_dead_seconds)
        yield from (depth, oldest, running, dead, oldest_dead)

    @staticmethod
    def _families() -> tuple[Any, ...]:
        # Asked for by prometheus_client only: it is imported already.
        from prometheus_client.core import GaugeMetricFamily

        return (
            GaugeMetricFamily(
                "ultimate_jobs_queue_depth",
                "Jobs due and waiting for a worker.",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "ultimate_jobs_queue_oldest_ready_seconds",
                "How long the longest-waiting due job has waited (0 when none).",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "ultimate_jobs_queue_running",
                "Jobs claimed by a worker, lease held.",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "ultimate_jobs_queue_dead_jobs",
                "Dead letters (state 'dead'), requeueable, in the hot table and the "
                "archive.",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "ultimate_jobs_queue_oldest_dead_seconds",
                "How long ago the earliest dead letter still kept died (0 when none).",
                labels=["queue"],
            ),
        )


def materialize() -> ModuleType:
    """Register the series in prometheus_client's default registry (importing it),
    add what was tallied so far, and record into them from now on. Idempotent."""
    global _live
    if _live is not None:
        return _live
    live = importlib.import_module("ultimate_jobs.observability.registered")
    with _lock:
        if _live is None:
            for (series, labels), amount in _counts.items():
                metric = getattr(live, series)
                metric.labels(*labels).inc(amount)
            for (series, labels), (buckets, total) in _histograms.items():
                metric = getattr(live, series)
                child = metric.labels(*labels) if labels else metric
                # prometheus_client keeps a histogram as a count per bucket (not
                # cumulative) and a sum: the tallies are added to them as they are.
                for value, count in zip(child._buckets, buckets, strict=True):
                    if count:
                        value.inc(count)
                child._sum.inc(total[0])
            _counts.clear()
            _histograms.clear()
            _live = live
    return live


class _Watch(importlib.abc.MetaPathFinder):
    """Registers the series right after prometheus_client itself is imported."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "prometheus_client":
            return None
        sys.meta_path.remove(self)  # once; the other finders answer the spec
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec  # pragma: no cover - not a regular package: nothing to wrap
        exec_module = loader.exec_module

        def exec_then_register(module: ModuleType) -> None:
            exec_module(module)
            materialize()

        loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def watch() -> None:
    """M1 from the app's ``ready``: register the series now when prometheus_client is
    already imported (or multiprocess mode is on), else the moment it is."""
    if "prometheus_client" in sys.modules or os.environ.get(MULTIPROC_ENV):
        materialize()
        return
    if not any(isinstance(finder, _Watch) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Watch())


def __getattr__(name: str) -> Any:
    """``JOBS``, ``QUEUE_COLLECTOR`` … of registered.py: asking
    for one imports prometheus_client and registers the series."""
    if name in SERIES:
        return getattr(materialize(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
