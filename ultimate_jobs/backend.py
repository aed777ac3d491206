"""A ``django.tasks`` backend on this queue (X2).

::

    TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}

Django's own ``@task`` functions then run on ``manage.py jobs_worker``: each enqueue is
one job of the bridge job ``ultimate_jobs.django_task`` (declared below) on the task's
``queue_name``, with its priority and ``run_after``; the result id is the job id.
``get_result(id)`` answers a ``TaskResult`` read from the job row (in the hot table or
in the archive, Q2, found by api/locator.py), or, for an enqueue
staged in the outbox by a transaction that has not been relayed yet (O1), from the
outbox row (READY). The task is answered as it was enqueued: the settings given to
``.using()`` (priority, queue_name, run_after, backend) are kept in the job's input.
On Django 5.2 the ``django-tasks`` backport provides the same API.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.core.exceptions import SuspiciousOperation
from django.dispatch import receiver
from django.utils import timezone
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import NO_TENANT
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.handle import job
from ultimate_jobs.ground.exceptions import InvalidQueueName
from ultimate_jobs.ground.signals import job_settled
from ultimate_jobs.models import Job, JobState

if TYPE_CHECKING:
    from django.tasks import TaskResult, TaskResultStatus, signals
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.utils.json import normalize_json
else:
    try:
        from django.tasks import TaskResult, TaskResultStatus, signals
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskContext, TaskError
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.utils.json import normalize_json
    except ImportError:  # Django 5.2: the django-tasks backport
        from django_tasks import TaskResult, TaskResultStatus, signals
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskContext, TaskError
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.utils import normalize_json

logger = logging.getLogger(__name__)

BRIDGE = "ultimate_jobs.django_task"

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

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        try:  # the task's queue_name is the job's queue: refuse it where Django does
            validate_queue(task.queue_name, field="queue_name", job=BRIDGE)
        except InvalidQueueName as exc:
            raise InvalidTask(str(exc)) from exc

    def enqueue(
        self, task: Task[Any, Any], args: Any, kwargs: Any
    ) -> TaskResult[Any, Any]:
        self.validate_task(task)
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)  # USE_TZ=False: local time
        handle = django_task.using(
            queue=task.queue_name, priority=task.priority, run_at=run_after
        )
        enqueued = handle.enqueue(
            task=task.module_path,
            # Django's own check (as every backend): the same refusals and wording.
            args=stored_json(args),
            kwargs=stored_json(kwargs),
            backend=self.alias,
            call_id=uuid.uuid4().hex,
            priority=task.priority,
            queue_name=task.queue_name,
            run_after=None if task.run_after is None else task.run_after.isoformat(),
        )
        # Inside transaction.atomic() the job is staged in the outbox (O1): the row
        # read back is the outbox row, visible on this connection only until COMMIT.
        result = find_result(enqueued.id, task=task)
        if result is None:  # pragma: no cover - the row was written just above
            raise TaskResultDoesNotExist(str(enqueued.id))
        signals.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            pk = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        result = find_result(pk)
        if result is None:
            raise TaskResultDoesNotExist(result_id)
        return result


def stored_json(value: Any) -> Any:
    """What is stored for an argument: Django's ``normalize_json`` (bytes become text,
    other non-JSON types raise its TypeError), then JSON's form (int keys are text)."""
    return json.loads(json.dumps(normalize_json(value)))


def find_result(
    pk: uuid.UUID, *, task: Task[Any, Any] | None = None
) -> TaskResult[Any, Any] | None:
    """The TaskResult of a bridge job wherever the locator finds it (Q1): its job
    row (hot or archived, Q2), else its staged outbox row (O1)."""
    # The operator API loads here, not with the module: a worker imports this module
    # for the bridge job and never reads a result (N2, issue 26).
    from ultimate_jobs.api import locator

    found = locator.find(pk)
    if found is None:
        return None  # never enqueued, rolled back, or purged
    if found.job is not None:
        return task_result(found.job, task=task) if found.job.name == BRIDGE else None
    if found.staged is None or found.staged.name != BRIDGE:
        return None
    staged = found.staged
    return _result(
        staged.input,
        result_id=str(staged.id),
        status=TaskResultStatus.READY,
        enqueued_at=staged.staged_at,
        task=task,
        queue=staged.queue,
        priority=staged.priority,
    )


def task_result(
    row: Job, *, task: Task[Any, Any] | None = None
) -> TaskResult[Any, Any]:
    """The TaskResult of a bridge job's row."""
    status = TaskResultStatus[_STATUS[JobState(row.state)]]
    result = _result(
        row.input,
        result_id=str(row.id),
        status=status,
        enqueued_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        errors=(
            [task_error(row.last_error)]
            if status == TaskResultStatus.FAILED and row.last_error
            else []
        ),
        worker_ids=[row.worker_id] * row.attempt if row.worker_id else [],
        task=task,
        queue=row.queue,
        priority=row.priority,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", row.result)
    return result


def _result(
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
    backend = stored.get("backend", "default")
    if task is None:
        task = enqueued_task(
            stored, result_id, backend=backend, queue=queue, priority=priority
        )
    return TaskResult(
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


def enqueued_task(
    stored: dict[str, Any], result_id: str, *, backend: str, queue: str, priority: int
) -> Task[Any, Any]:
    """The Task as it was enqueued: the stored path with its ``.using()`` settings.

    Raises ImportError when the path no longer imports, and SuspiciousOperation when
    it names something that is not a Task (which is never called).
    """
    path = stored.get("task", "")
    target = import_string(path)
    if not isinstance(target, Task):
        raise SuspiciousOperation(f"Task {result_id} does not point to a Task ({path})")
    run_after = stored.get("run_after")
    return target.using(
        priority=stored.get("priority", priority),
        queue_name=stored.get("queue_name", queue),
        run_after=None if run_after is None else datetime.fromisoformat(run_after),
        backend=backend,
    )


def task_error(last_error: str) -> TaskError:
    """A job's stored error as a TaskError: ``module.Class: message``, a blank line,
    then the traceback (R4)."""
    head, _, trace = last_error.partition("\n\n")
    return TaskError(
        exception_class_path=head.split(":", 1)[0].strip(),
        traceback=trace or last_error,
    )


def from_signals() -> Any:
    """django.tasks.signals, or the backport's."""
    return signals


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
    rows = Job.objects.using(get_settings().DATABASE).filter(
        pk=run.job_id, state="running"
    )
    # A path that no longer imports, or names no Task, fails the attempt here.
    current = task_result(rows.get())
    target = current.task
    signals.task_started.send(sender=type(target.get_backend()), task_result=current)
    if target.takes_context:
        value = target.call(TaskContext(task_result=current), *args, **kwargs)
    else:
        value = target.call(*args, **kwargs)
    # Kept for get_result(); written while this attempt still holds the row. A value
    # Django's normalize_json refuses fails the task, as on Django's own backends.
    rows.update(result=normalize_json(value))


@receiver(job_settled, sender=django_task)
def _task_finished(sender: Any, settled: Any, **kwargs: Any) -> None:
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


def send_finished(result: TaskResult[Any, Any], error: BaseException | None) -> None:
    """Send task_finished; for a failure, from inside a handler of the task's own
    exception, as Django's backends do: its logger reads ``sys.exc_info()``."""
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


__all__ = [
    "BRIDGE",
    "JobsBackend",
    "TaskContext",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "django_task",
    "find_result",
    "normalize_json",
    "stored_json",
    "task_result",
]
