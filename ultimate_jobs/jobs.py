"""The jobs this app declares itself, autodiscovered like any app's ``jobs`` module: the
hourly purge of the app's own tables (F3, F6), fired by the scheduler, and the bridge
that runs django.tasks Tasks (X2), declared in ultimate_jobs.backend where
``django.tasks`` (or, on Django 5.2, the django-tasks backport) is installed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.retention.housekeeping import app_targets
from ultimate_jobs.retention.purge import purge
from ultimate_jobs.scheduling.tasks import task

try:  # declares the bridge job, ultimate_jobs.django_task (X2)
    from ultimate_jobs import backend  # noqa: F401
except ImportError:  # Django 5.2 without the django-tasks backport: no django.tasks
    pass

PURGE = "ultimate_jobs.purge"


purge_tables = purge(
    PURGE,
    app_targets,
    description="Deletes expired events, workers and leases, old published outbox "
    "rows and finished jobs past their retention.",
)


@task(
    cron="0 * * * *",
    tz="UTC",
    name="ultimate_jobs.purge_hourly",
    description="Puts the purge of the app's own tables on the queue every hour.",
)
def purge_hourly(occurrence: datetime) -> list[tuple[JobHandle, dict[str, Any]]]:
    return [(purge_tables, {})]
