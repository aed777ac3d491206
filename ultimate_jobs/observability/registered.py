"""The series of M1 in prometheus_client's default registry: imported by metrics.py
when prometheus_client is (``metrics.watch``), never by a process without it.

The counters and histograms the worker records (``JOBS``, ``JOB_DURATION``,
``LEASES_LOST``, ``ROWS_UNREADABLE``, ``BODIES_ABANDONED``, ``CLAIM_SECONDS``) and the
queue gauges computed at scrape time (metrics.py's ``QueueCollector``) are registered
here, as they were when metrics.py imported prometheus_client itself; what metrics.py
counted before this module existed is added to them once (``metrics.materialize``).
Reach these names through metrics.py (``metrics.QUEUE_COLLECTOR``, ``materialize()``),
never by importing this module: an import that bypasses ``materialize`` would leave
the worker recording into tallies nobody serves.
"""

from __future__ import annotations

import functools
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram

from ultimate_jobs.observability.metrics import (
    CLAIM_BUCKETS,
    DURATION_BUCKETS,
    QueueCollector,
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


@functools.lru_cache(maxsize=4096)
def outcome_series(queue: str, job: str, outcome: str) -> tuple[Any, Any]:
    """The two series one attempt moves; looked up once per label set, not per job
    (the label sets are bounded: declared names, queues and outcomes)."""
    return JOBS.labels(queue, job, outcome), JOB_DURATION.labels(queue, job)


QUEUE_COLLECTOR = QueueCollector()
REGISTRY.register(QUEUE_COLLECTOR)
