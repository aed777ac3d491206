"""The jobs this app declares itself: the bridge that runs django.tasks Tasks (X2), and
the hourly purge of the app's own tables (F3, F6), fired by the scheduler."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.dispatch import receiver
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declarations import NO_TENANT, job
from ultimate_jobs.handle import JobHandle
from ultimate_jobs.housekeeping import app_targets
from ultimate_jobs.purge import purge
from ultimate_jobs.retry import Retry
from ultimate_jobs.run import Run
from ultimate_jobs.signals import job_settled
from ultimate_jobs.tasks import task

BRIDGE = "ultimate_jobs.django_task"
PURGE = "ultimate_jobs.purge"


@job(
    name=BRIDGE,
    idempotency_key=lambda p: p["call_id"],
    tenant=NO_TENANT,
    retry=Retry(attempts=1),  # django.tasks has no retries: a failure is FAILED
    description="Runs one django.tasks Task enqueued through ultimate_jobs.backend.",
)
def django_task(
    run: Run,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    backend: str,
    call_id: str,
) -> None:
    from ultimate_jobs.backend import (
        TaskContext,
        from_signals,
        normalize_json,
        task_result,
    )
    from ultimate_jobs.models import Job

    rows = Job.objects.using(get_settings().DATABASE).filter(
        pk=run.job_id, state="running"
    )
    current = task_result(rows.get(), backend)
    from_signals().task_started.send(
        sender=type(current.task.get_backend()), task_result=current
    )
    target = import_string(task)
    if target.takes_context:
        value = target.call(TaskContext(task_result=current), *args, **kwargs)
    else:
        value = target.call(*args, **kwargs)
    # Kept for get_result(); written while this attempt still holds the row.
    rows.update(result=normalize_json(value))


@receiver(job_settled, sender=django_task)
def _task_finished(sender: Any, settled: Any, **kwargs: Any) -> None:
    """task_finished fires once the row is settled, so get_result() agrees with it."""
    from ultimate_jobs.backend import from_signals, task_result
    from ultimate_jobs.models import Job

    job = Job.objects.using(get_settings().DATABASE).filter(pk=settled.job_id).first()
    if job is not None:
        result = task_result(job)
        from_signals().task_finished.send(
            sender=type(result.task.get_backend()), task_result=result
        )


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
