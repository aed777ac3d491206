"""A realistic app's declarations: ~40 jobs on a few queues and a few cron tasks.

The measured job (``visit``) is one of them: its body writes one row through the ORM,
logs at INFO through the run's logger, and records its start (benchmarks/record.py),
like the one-job app's ``noop``. The others are never enqueued; they are there because
a real project declares them, and the worker claims for all of their names and queues.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from benchmarks.realapp.models import Visit
from benchmarks.record import record
from ultimate_jobs import NO_TENANT, Retry, Run, job, task

QUEUES = ["default", "emails", "reports", "billing"]


@job(idempotency_key=lambda p: f"visit:{p['n']}", tenant=NO_TENANT)
def visit(run: Run, n: int) -> None:
    record(n)
    Visit.objects.create(n=n)
    run.logger.info("realapp.visit", extra={"n": n})


def _body(run: Run, n: int) -> None:
    Visit.objects.create(n=n)


# 39 more jobs, the way a project of a few apps declares them: sync, with retries,
# on one of a few queues; some with tenants.
OTHERS = [
    job(
        idempotency_key=lambda p: f"other:{p['n']}",
        tenant=NO_TENANT,
        name=f"realapp.job{i:02d}",
        queue=QUEUES[i % len(QUEUES)],
        retry=Retry(attempts=3 + i % 3, backoff="exponential", delay="1s"),
        description=f"Declared job number {i}.",
    )(_body)
    for i in range(39)
]


def _cron(occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
    return [(OTHERS[0], {"n": int(occurrence.timestamp())})]


# A few cron tasks (C1): hourly and daily, so none fires during a measurement.
TASKS = [
    task(cron=cron, tz="UTC", name=f"realapp.task{i}", description="Cron task.")(_cron)
    for i, cron in enumerate(["0 * * * *", "30 * * * *", "0 3 * * *", "15 4 * * 1"])
]
