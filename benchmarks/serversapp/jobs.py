"""The simulation's jobs: one no-op job per queue, ``sim0`` … ``sim<N-1>`` (SIM_SERVERS).

Each body appends its ``n`` to the process's record file (benchmarks/record.py), so the
orchestrator can tell from the bodies' own records whether a job ran once or twice.
"""

from __future__ import annotations

import os

from benchmarks.record import record
from ultimate_jobs import NO_TENANT, Run, job


def _noop(run: Run, n: int) -> None:
    record(n)


QUEUE_COUNT = len(os.environ.get("SIM_SERVERS", "").split(",")) or 1
HANDLES = [
    job(
        idempotency_key=lambda p: f"sim:{p['n']}",
        tenant=NO_TENANT,
        name=f"sim{i}",
        queue=f"sim{i}",
    )(_noop)
    for i in range(QUEUE_COUNT)
]
