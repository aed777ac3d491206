"""The benchmark job, declared with the public ``@job`` API."""

from __future__ import annotations

from benchmarks.record import record
from ultimate_jobs import NO_TENANT, Run, job


@job(idempotency_key=lambda p: f"noop:{p['n']}", tenant=NO_TENANT, queue="bench")
def noop(run: Run, n: int) -> None:
    record(n)
