"""A cron task for the scheduler process tests only.

Only tests/settings_scheduler.py installs this app, so the scheduler role that every
other test's ``jobs_worker`` runs never fires it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ultimate_jobs import NO_TENANT, Run, job, task


@job(
    idempotency_key=lambda p: f"minute:{p['occurrence']}",
    tenant=NO_TENANT,
    queue="cron",
)
def minute_job(run: Run, occurrence: str) -> None:
    """Nothing to do: the tests count the rows the scheduler inserts."""


@task(cron="* * * * *", tz="UTC")
def every_minute(occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
    return [(minute_job, {"occurrence": occurrence.isoformat()})]
