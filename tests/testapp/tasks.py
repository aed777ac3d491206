"""Django's own @task functions, run on ultimate_jobs through the backend (X2)."""

from __future__ import annotations

from tests.testapp.models import Record

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]


@task()
def add(a: int, b: int) -> int:
    Record.objects.create(key="add", event=f"{a}+{b}")
    return a + b


@task(priority=10, queue_name="default")
def boom() -> None:
    raise ValueError("the task failed")


@task()
async def double(value: int) -> int:
    return value * 2


@task(takes_context=True)
def attempt_of(context, label: str) -> dict[str, object]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}
