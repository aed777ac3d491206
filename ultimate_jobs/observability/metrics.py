"""Prometheus metrics (M1), registered in prometheus_client's default registry when
the app is ready (apps.py imports this module).

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
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

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

JOBS = Counter(
    "ultimate_jobs_jobs",
    "Attempts that ended, by queue, job and outcome (W9; 'unowned': fenced out).",
    ["queue", "job", "outcome"],
)
JOB_DURATION = Histogram(
    "ultimate_jobs_job_duration_seconds",
    "Wall time of one attempt, from the start of the body to the write of its outcome.",
    ["queue", "job"],
    buckets=DURATION_BUCKETS,
)
LEASES_LOST = Counter(
    "ultimate_jobs_leases_lost",
    "Leases a worker failed to renew for a whole window (the job may run twice).",
    ["queue"],
)
ROWS_UNREADABLE = Counter(
    "ultimate_jobs_rows_unreadable",
    "Stored rows a reader skipped because Python cannot read them (B4), by table.",
    ["table"],
)
BODIES_ABANDONED = Counter(
    "ultimate_jobs_bodies_abandoned",
    "Bodies that ran on past their timeout, ignoring their cancel token: each holds "
    "a handler thread until it returns (S6).",
    ["queue", "job"],
)
CLAIM_SECONDS = Histogram(
    "ultimate_jobs_claim_seconds",
    "Time one claim statement took (W2), empty claims included.",
    buckets=CLAIM_BUCKETS,
)


def job_label(name: str, jobs: Registry = registry) -> str:
    """The ``job`` label of a row: its declared name, never anything else."""
    return name if name in jobs else UNREGISTERED


@functools.lru_cache(maxsize=4096)
def _outcome_series(queue: str, job: str, outcome: str) -> tuple[Any, Any]:
    """The two series one attempt moves; looked up once per label set, not per job
    (the label sets are bounded: declared names, queues and outcomes)."""
    return JOBS.labels(queue, job, outcome), JOB_DURATION.labels(queue, job)


def attempt_finished(
    job: ClaimedJob, outcome: str, duration: float, *, jobs: Registry = registry
) -> None:
    """Count one attempt's outcome and observe its duration."""
    count, durations = _outcome_series(
        job["queue"], job_label(job["name"], jobs), outcome
    )
    count.inc()
    durations.observe(max(duration, 0.0))


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
    count, histogram = _outcome_series(queue, job_label(name, jobs), outcome)
    count.inc(len(durations))
    observe = histogram.observe
    for duration in durations:
        observe(max(duration, 0.0))


def job_buried(job: ClaimedJob, *, jobs: Registry = registry) -> None:
    """Count a job the claim itself buried (W5: lease lapsed on the final attempt):
    dead-lettered, or dropped for a job declared ``dead_letter=False``."""
    outcome = "dead-lettered" if job["state"] == "dead" else "dropped"
    JOBS.labels(
        queue=job["queue"], job=job_label(job["name"], jobs), outcome=outcome
    ).inc()


def lease_lost(queue: str) -> None:
    LEASES_LOST.labels(queue=queue).inc()


def row_unreadable(table: str, count: int = 1) -> None:
    """Count stored rows a reader skipped (B4); ``table`` is one of the app's."""
    ROWS_UNREADABLE.labels(table=table).inc(count)


def body_abandoned(queue: str, name: str, *, jobs: Registry = registry) -> None:
    """Count a body that ran past its timeout and kept its thread (S6)."""
    BODIES_ABANDONED.labels(queue=queue, job=job_label(name, jobs)).inc()


def claim_finished(seconds: float) -> None:
    CLAIM_SECONDS.observe(max(seconds, 0.0))


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

    def describe(self) -> Iterator[Metric]:
        # Registration asks for the names: answer them without touching the database.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
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
    def _families() -> tuple[GaugeMetricFamily, ...]:
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


QUEUE_COLLECTOR = QueueCollector()
REGISTRY.register(QUEUE_COLLECTOR)
