"""A ``django.tasks`` backend on this queue (X2).

::

    TASKS = {"default": {"BACKEND": "ultimate_jobs.backend.JobsBackend"}}

Django's own ``@task`` functions then run on ``manage.py jobs_worker``: each enqueue is
one job of the bridge job ``ultimate_jobs.django_task`` (declared, with its body, in
ultimate_jobs.jobs, which a worker loads without ``django.tasks``) on the task's
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
import uuid
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.ground.exceptions import InvalidQueueName
from ultimate_jobs.jobs import (
    BRIDGE,
    django_task,
    send_finished,
    stored_result,
    task_error,
    task_result,
)

if TYPE_CHECKING:
    from django.tasks import TaskResult, TaskResultStatus, signals
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.utils.json import normalize_json
else:
    try:
        from django.tasks import TaskResult, TaskResultStatus, signals
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskContext
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.utils.json import normalize_json
    except ImportError:  # Django 5.2: the django-tasks backport
        from django_tasks import TaskResult, TaskResultStatus, signals
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskContext
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.utils import normalize_json


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
    # The operator API loads here, not with the module: a web process that only
    # enqueues never reads a result (N2, issue 26).
    from ultimate_jobs.api import locator

    found = locator.find(pk)
    if found is None:
        return None  # never enqueued, rolled back, or purged
    if found.job is not None:
        return task_result(found.job, task=task) if found.job.name == BRIDGE else None
    if found.staged is None or found.staged.name != BRIDGE:
        return None
    staged = found.staged
    return stored_result(
        staged.input,
        result_id=str(staged.id),
        status=TaskResultStatus.READY,
        enqueued_at=staged.staged_at,
        task=task,
        queue=staged.queue,
        priority=staged.priority,
    )


def from_signals() -> Any:
    """django.tasks.signals, or the backport's."""
    return signals


__all__ = [
    "BRIDGE",
    "JobsBackend",
    "TaskContext",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "django_task",
    "find_result",
    "normalize_json",
    "send_finished",
    "stored_json",
    "task_error",
    "task_result",
]
