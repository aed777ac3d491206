"""Prometheus metrics (M1), registered in prometheus_client's default registry.

Label sets are bounded: ``job`` comes from the registry of declared names, ``queue``
from declarations and worker options, ``outcome`` from the fixed list of W9.
"""

from __future__ import annotations

from prometheus_client import Counter

LEASES_LOST = Counter(
    "ultimate_jobs_leases_lost",
    "Leases a worker failed to renew for a whole window (the job may run twice).",
    ["queue"],
)


def lease_lost(queue: str) -> None:
    LEASES_LOST.labels(queue=queue).inc()
