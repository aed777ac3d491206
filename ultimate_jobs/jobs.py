"""The jobs this app declares itself, autodiscovered like any app's ``jobs`` module: the
hourly purge of the app's own tables (F3, F6), fired by the scheduler, and the bridge
job ``ultimate_jobs.django_task`` that runs django.tasks Tasks (X2) where
``django.tasks`` (or, on Django 5.2, the django-tasks backport) is installed.

The bridge is declared here, and ultimate_jobs.backend (the ``JobsBackend`` class
Django's ``TASKS`` setting names) enqueues it. A worker declares the bridge without
importing ``django.tasks``: the job's body and its ``task_finished`` receiver import it
when a bridge job runs or settles (N2's RSS: 0.2 MiB a worker that runs no Django
task never holds).
"""

from __future__ import annotations

import logging
from datetime import datetime
from importlib.util import find_spec
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.dispatch import receiver
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import NO_TENANT
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.handle import JobHandle, job
from ultimate_jobs.ground.signals import job_settled
from ultimate_jobs.models import Job, JobState
from ultimate_jobs.retention.housekeeping import app_targets
from ultimate_jobs.retention.purge import purge
from ultimate_jobs.scheduling.tasks import task

if TYPE_CHECKING:
    from django.tasks import TaskResult, TaskResultStatus
    from django.tasks.base import Task, TaskError

logger = logging.getLogger(__name__)

PURGE = "ultimate_jobs.purge"
BRIDGE = "ultimate_jobs.django_task"


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


# -- the django.tasks bridge (X2) ------------------------------------------------------

_STATUS = {
    JobState.READY: "READY",
    JobState.DELAYED: "READY",
    JobState.SUSPENDED: "READY",
    JobState.RUNNING: "RUNNING",
    JobState.DONE: "SUCCESSFUL",
    JobState.FAILED: "FAILED",
    JobState.DEAD: "FAILED",
    JobState.CANCELLED: "FAILED",
}


def has_django_tasks() -> bool:
    """Whether ``django.tasks`` (Django 6.0) or the django-tasks backport is installed,
    answered without importing either."""
    return (
        find_spec("django.tasks") is not None or find_spec("django_tasks") is not None
    )


def django_tasks() -> Any:
    """The names of ``django.tasks`` the bridge uses (the backport's on Django 5.2),
    imported on first use."""
    if TYPE_CHECKING:
        from django.tasks import TaskResult, TaskResultStatus, signals
        from django.tasks.base import Task, TaskContext, TaskError
        from django.utils.json import normalize_json
    else:
        try:
            from django.tasks import TaskResult, TaskResultStatus, signals
            from django.tasks.base import Task, TaskContext, TaskError
            from django.utils.json import normalize_json
        except ImportError:  # Django 5.2: the django-tasks backport
            from django_tasks import TaskResult, TaskResultStatus, signals
            from django_tasks.base import Task, TaskContext, TaskError
            from django_tasks.utils import normalize_json
    return SimpleNamespace(
        TaskResult=TaskResult,
        TaskResultStatus=TaskResultStatus,
        signals=signals,
        Task=Task,
        TaskContext=TaskContext,
        TaskError=TaskError,
        normalize_json=normalize_json,
    )


def task_result(
    row: Job, *, task: Task[Any, Any] | None = None
) -> TaskResult[Any, Any]:
    """The TaskResult of a bridge job's row."""
    status = django_tasks().TaskResultStatus[_STATUS[JobState(row.state)]]
    failed = status.name == "FAILED"
    result = stored_result(
        row.input,
        result_id=str(row.id),
        status=status,
        enqueued_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        errors=[task_error(row.last_error)] if failed and row.last_error else [],
        worker_ids=[row.worker_id] * row.attempt if row.worker_id else [],
        task=task,
        queue=row.queue,
        priority=row.priority,
    )
    if status.name == "SUCCESSFUL":
        object.__setattr__(result, "_return_value", row.result)
    return result


def stored_result(
    stored: dict[str, Any],
    *,
    result_id: str,
    status: TaskResultStatus,
    enqueued_at: datetime | None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    errors: list[TaskError] | None = None,
    worker_ids: list[str] | None = None,
    task: Task[Any, Any] | None = None,
    queue: str = "default",
    priority: int = 0,
) -> TaskResult[Any, Any]:
    """A TaskResult from a bridge job's stored input and what its row says."""
    backend = stored.get("backend", "default")
    if task is None:
        task = enqueued_task(
            stored, result_id, backend=backend, queue=queue, priority=priority
        )
    result: TaskResult[Any, Any] = django_tasks().TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=started_at,
        args=stored.get("args", []),
        kwargs=stored.get("kwargs", {}),
        backend=backend,
        errors=errors or [],
        worker_ids=worker_ids or [],
    )
    return result


def enqueued_task(
    stored: dict[str, Any], result_id: str, *, backend: str, queue: str, priority: int
) -> Task[Any, Any]:
    """The Task as it was enqueued: the stored path with its ``.using()`` settings.

    Raises ImportError when the path no longer imports, and SuspiciousOperation when
    it names something that is not a Task (which is never called).
    """
    from django.core.exceptions import SuspiciousOperation

    path = stored.get("task", "")
    target = import_string(path)
    if not isinstance(target, django_tasks().Task):
        raise SuspiciousOperation(f"Task {result_id} does not point to a Task ({path})")
    run_after = stored.get("run_after")
    using: Task[Any, Any] = target.using(
        priority=stored.get("priority", priority),
        queue_name=stored.get("queue_name", queue),
        run_after=None if run_after is None else datetime.fromisoformat(run_after),
        backend=backend,
    )
    return using


def task_error(last_error: str) -> TaskError:
    """A job's stored error as a TaskError: ``module.Class: message``, a blank line,
    then the traceback (R4)."""
    head, _, trace = last_error.partition("\n\n")
    error: TaskError = django_tasks().TaskError(
        exception_class_path=head.split(":", 1)[0].strip(),
        traceback=trace or last_error,
    )
    return error


def send_finished(result: TaskResult[Any, Any], error: BaseException | None) -> None:
    """Send task_finished; for a failure, from inside a handler of the task's own
    exception, as Django's backends do: its logger reads ``sys.exc_info()``."""
    signals = django_tasks().signals
    sender = type(result.task.get_backend())
    if error is None:
        signals.task_finished.send(sender=sender, task_result=result)
        return
    trace = error.__traceback__
    try:
        raise error
    except BaseException:
        error.__traceback__ = trace  # the task's frames, not this one on top
        signals.task_finished.send(sender=sender, task_result=result)


def run_task(run: Run, args: list[Any], kwargs: dict[str, Any]) -> None:
    """The bridge job's body: call the Task its row names, keep its return value."""
    tasks = django_tasks()
    rows = Job.objects.using(get_settings().DATABASE).filter(
        pk=run.job_id, state="running"
    )
    # A path that no longer imports, or names no Task, fails the attempt here.
    current = task_result(rows.get())
    target = current.task
    tasks.signals.task_started.send(
        sender=type(target.get_backend()), task_result=current
    )
    if target.takes_context:
        value = target.call(tasks.TaskContext(task_result=current), *args, **kwargs)
    else:
        value = target.call(*args, **kwargs)
    # Kept for get_result(); written while this attempt still holds the row. A value
    # Django's normalize_json refuses fails the task, as on Django's own backends.
    rows.update(result=tasks.normalize_json(value))


def task_finished(sender: Any, settled: Any, **kwargs: Any) -> None:
    """task_finished fires once the row is settled, so get_result() agrees with it.

    A receiver must never raise into the settle (the worker and the testing runner
    alike): a task that can no longer be loaded is logged, and no signal is sent.
    """
    row = Job.objects.using(get_settings().DATABASE).filter(pk=settled.job_id).first()
    if row is None:
        return
    try:
        result = task_result(row)
    except Exception:
        logger.exception(
            "jobs.task.unloadable",
            extra={
                "job_id": str(row.id),
                "job_name": row.name,
                "task": row.input.get("task"),
                "state": row.state,
            },
        )
        return
    send_finished(result, settled.error)


if has_django_tasks():

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
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: str | None = None,
    ) -> None:
        run_task(run, args, kwargs)

    receiver(job_settled, sender=django_task)(task_finished)
