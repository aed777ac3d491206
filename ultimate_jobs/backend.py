"""A ``django.tasks`` backend on this queue (X2).

::

    TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}

Django's own ``@task`` functions then run on ``manage.py jobs_worker``: each enqueue is
one job of the bridge job ``ultimate_jobs.django_task`` (declared below) on
the task's ``queue_name``, with its priority and ``run_after``; ``get_result(id)``
answers a ``TaskResult`` with the status and the return value read from the job row.
On Django 5.2 the ``django-tasks`` backport provides the same API.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import NO_TENANT
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.handle import job
from ultimate_jobs.models import Job, JobState
from ultimate_jobs.signals import job_settled

if TYPE_CHECKING:
    from django.tasks import TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
else:
    try:
        from django.tasks import TaskResult, TaskResultStatus
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskContext, TaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
    except ImportError:  # Django 5.2: the django-tasks backport
        from django_tasks import TaskResult, TaskResultStatus
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskContext, TaskError
        from django_tasks.exceptions import TaskResultDoesNotExist

logger = logging.getLogger(__name__)

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


class JobsBackend(BaseTaskBackend):
    """Runs Django tasks as ultimate_jobs jobs."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def enqueue(
        self, task: Task[Any, Any], args: Any, kwargs: Any
    ) -> TaskResult[Any, Any]:
        self.validate_task(task)
        handle = django_task.using(
            queue=task.queue_name,
            priority=task.priority,
            run_at=task.run_after,
        )
        enqueued = handle.enqueue(
            task=task.module_path,
            args=normalize_json(list(args)),
            kwargs=normalize_json(dict(kwargs)),
            backend=self.alias,
            call_id=uuid.uuid4().hex,
        )
        result = self.get_result(str(enqueued.id))
        from_signals().task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            pk = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        job = (
            Job.objects.using(get_settings().DATABASE)
            .filter(Q(pk=pk) & Q(name="ultimate_jobs.django_task"))
            .first()
        )
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        return task_result(job, self.alias)


def task_result(job: Job, alias: str | None = None) -> TaskResult[Any, Any]:
    """The TaskResult of a bridge job's row."""
    task: Task[Any, Any] = import_string(job.input["task"])
    status = TaskResultStatus[_STATUS[JobState(job.state)]]
    errors = []
    if status == TaskResultStatus.FAILED and job.last_error:
        head = job.last_error.split(":", 1)[0].strip()
        errors.append(TaskError(exception_class_path=head, traceback=job.last_error))
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=status,
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=job.input.get("args", []),
        kwargs=job.input.get("kwargs", {}),
        backend=alias or job.input.get("backend", "default"),
        errors=errors,
        worker_ids=[job.worker_id] * job.attempt if job.worker_id else [],
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


def normalize_json(value: Any) -> Any:
    """The JSON form of a value (tuples become lists); refuses what JSON cannot hold."""
    return json.loads(json.dumps(value))


def from_signals() -> Any:
    """django.tasks.signals, or the backport's."""
    try:
        from django.tasks import signals
    except ImportError:  # pragma: no cover - Django 5.2
        from django_tasks import signals  # type: ignore[no-redef]
    return signals


BRIDGE = "ultimate_jobs.django_task"


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
    job = Job.objects.using(get_settings().DATABASE).filter(pk=settled.job_id).first()
    if job is not None:
        result = task_result(job)
        from_signals().task_finished.send(
            sender=type(result.task.get_backend()), task_result=result
        )


__all__ = [
    "JobsBackend",
    "TaskContext",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_result",
]
