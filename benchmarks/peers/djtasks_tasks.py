"""The Django task (``django.tasks.task``), run by django-tasks-db's ``db_worker``."""

from __future__ import annotations

from django.tasks import task

from benchmarks.record import record


@task(queue_name="bench")
def noop(n: int) -> None:
    record(n)
