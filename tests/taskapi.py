"""One import point for the django.tasks API on both CI legs (X2).

Django 6.x ships ``django.tasks``; on Django 5.2 the ``django-tasks`` backport provides
the same API under ``django_tasks``, with two exceptions renamed (``InvalidTaskError``,
``InvalidTaskBackendError``) and its logger named ``django_tasks``. The tests import
from here so one test body runs on both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        signals,
        task,
        task_backends,
    )
    from django.tasks.backends.immediate import ImmediateBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )

    LOGGER: str  # the django.tasks logger's name
    IMMEDIATE: str  # the dotted path of ImmediateBackend
else:
    try:
        from django.tasks import (
            DEFAULT_TASK_QUEUE_NAME,
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            default_task_backend,
            signals,
            task,
            task_backends,
        )
        from django.tasks.backends.immediate import ImmediateBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
        from django.tasks.exceptions import (
            InvalidTask,
            InvalidTaskBackend,
            TaskResultDoesNotExist,
            TaskResultMismatch,
        )

        LOGGER = "django.tasks"
        IMMEDIATE = "django.tasks.backends.immediate.ImmediateBackend"
    except ImportError:  # Django 5.2: the django-tasks backport
        from django_tasks import (
            DEFAULT_TASK_QUEUE_NAME,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            default_task_backend,
            signals,
            task,
            task_backends,
        )
        from django_tasks.backends.immediate import (
            ImmediateBackend,
        )
        from django_tasks.base import (
            TASK_MAX_PRIORITY,
            TASK_MIN_PRIORITY,
            Task,
            TaskError,
        )
        from django_tasks.exceptions import (
            InvalidTaskBackendError as InvalidTaskBackend,
        )
        from django_tasks.exceptions import (
            InvalidTaskError as InvalidTask,
        )
        from django_tasks.exceptions import (
            TaskResultDoesNotExist,
            TaskResultMismatch,
        )

        LOGGER = "django_tasks"
        IMMEDIATE = "django_tasks.backends.immediate.ImmediateBackend"

JOBS_BACKEND = "ultimate_jobs.backend.JobsBackend"

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "IMMEDIATE",
    "JOBS_BACKEND",
    "LOGGER",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "ImmediateBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "default_task_backend",
    "signals",
    "task",
    "task_backends",
]
