"""The task functions of Django's ``tests/tasks/tasks.py`` (and the django-tasks
backport's ``tests/tasks.py``), written again for the ported contract tests (X2).

The names are upstream's, so a test here reads like the upstream test it mirrors.
"""

from __future__ import annotations

import time
from typing import Any

from tests.taskapi import TaskContext, task


@task()
def noop_task(*args: Any, **kwargs: Any) -> None:
    return None


@task
def noop_task_from_bare_decorator(*args: Any, **kwargs: Any) -> None:
    return None


@task()
async def noop_task_async(*args: Any, **kwargs: Any) -> None:
    return None


@task()
def calculate_meaning_of_life() -> int:
    return 42


@task()
def failing_task_value_error() -> None:
    raise ValueError("This Task failed due to ValueError")


@task()
def failing_task_system_exit() -> None:
    raise SystemExit("This Task failed due to SystemExit")


@task()
def failing_task_keyboard_interrupt() -> None:
    raise KeyboardInterrupt("This Task failed due to KeyboardInterrupt")


@task()
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value() -> Any:
    # Neither JSON nor picklable.
    return lambda: True


@task()
def exit_task() -> None:
    exit(1)


@task()
def hang() -> None:
    """Do nothing for five minutes."""
    time.sleep(300)


@task()
def sleep_for(seconds: float) -> None:
    time.sleep(seconds)


@task(takes_context=True)
def get_task_id(context: TaskContext[Any, Any]) -> str:
    return context.task_result.id


@task(takes_context=True)
def check_context(context: TaskContext[Any, Any], attempt: int) -> None:
    # Upstream's ``test_context`` task, renamed so pytest does not collect it.
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt


@task()
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Answer what the body received (the JSON form of the enqueued arguments)."""
    return {"args": list(args), "kwargs": kwargs}
