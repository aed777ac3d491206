"""Declaring cron tasks: the @task decorator, its definition and the tasks registry (C1).

A task is a module-level, synchronous function of one occurrence (an aware datetime in
the task's time zone) that answers ``(job_handle, input)`` pairs. It is cheap and does
no I/O: fan-out over rows is a job the task puts on the queue, not work the task does.
Tasks live in the apps' ``jobs.py`` modules beside the jobs, and are autodiscovered with
them. ``@task`` checks everything where it is written: the cron (every problem listed in
one InvalidCron), the time zone (required, IANA), the catch-up policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from ultimate_jobs.declaration.definition import default_name
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import (
    TaskDeclarationInvalid,
    UnknownTask,
)
from ultimate_jobs.scheduling.cron import CronSchedule

CatchUp = Literal["skip", "run-once", "run-all"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = ("skip", "run-once", "run-all")
Entries = list[tuple[JobHandle, dict[str, Any]]]
TaskFunction = Callable[[datetime], Iterable[tuple[JobHandle, Mapping[str, Any]]]]


def check_catch_up(catch_up: object, max_catch_up: object, name: str) -> None:
    """Refuse a catch-up policy or bound that is not one of the documented ones."""
    if catch_up not in CATCH_UP_POLICIES:
        raise TaskDeclarationInvalid(
            "catch_up", catch_up, f"one of {', '.join(CATCH_UP_POLICIES)}", job=name
        )
    validate.whole(
        max_catch_up,
        field="max_catch_up",
        most=1000,
        error=partial(TaskDeclarationInvalid, job=name),
    )


def check_entries(name: str, answer: object) -> Entries:
    """The pairs a task answered, checked: (JobHandle, dict of keyword arguments)."""
    if isinstance(answer, str | bytes | Mapping) or not isinstance(answer, Iterable):
        raise TaskDeclarationInvalid(
            "answer", answer, "a task answers a list of (job, input) pairs", job=name
        )
    entries: Entries = []
    for index, pair in enumerate(answer):
        if (
            not isinstance(pair, tuple | list)
            or len(pair) != 2
            or not isinstance(pair[0], JobHandle)
            or not isinstance(pair[1], Mapping)
        ):
            raise TaskDeclarationInvalid(
                f"answer[{index}]",
                pair,
                "each entry is (a @job handle, a dict of its input)",
                job=name,
            )
        entries.append((pair[0], dict(pair[1])))
    return entries


@dataclass(frozen=True, eq=False)
class TaskDefinition:
    """Everything declared about one task, checked."""

    name: str
    func: TaskFunction
    schedule: CronSchedule
    catch_up: CatchUp = "skip"
    max_catch_up: int = 10
    description: str = ""

    @property
    def origin(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"

    @property
    def watermark_key(self) -> str:
        return f"task:{self.name}"


class TaskHandle:
    """The surface of one declared task: its entries, next run, manual fire, manifest.

    Not callable, like a job handle: the scheduler (or ``trigger``) fires it. The
    function itself is ``.func``, for unit tests.
    """

    __slots__ = ("definition",)

    def __init__(self, definition: TaskDefinition) -> None:
        self.definition = definition

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def func(self) -> TaskFunction:
        return self.definition.func

    def entries(self, occurrence: datetime) -> Entries:
        """Call the function for ``occurrence`` and check what it answers."""
        local = occurrence.astimezone(self.definition.schedule.zone)
        return check_entries(self.name, self.definition.func(local))

    def next_run(self, after: datetime | None = None) -> datetime:
        """The next occurrence after ``after`` (default: now), in the task's zone."""
        schedule = CronSchedule(
            self.definition.schedule.expression, self.definition.schedule.tz
        )
        return schedule.local(schedule.next_after(after or datetime.now(UTC)))

    def describe(self) -> dict[str, Any]:
        """The manifest entry for this task."""
        d = self.definition
        return {
            "kind": "task",
            "name": d.name,
            "origin": d.origin,
            "cron": d.schedule.expression,
            "tz": d.schedule.tz,
            "catch_up": d.catch_up,
            "max_catch_up": d.max_catch_up,
            "description": d.description,
        }

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name}>"


class TaskRegistry(Registry[TaskHandle]):
    """Every task declared in this process, by name (``UnknownTask`` for another)."""

    def __init__(self) -> None:
        super().__init__(unknown=UnknownTask)


task_registry = TaskRegistry()


def task(
    *,
    cron: str,
    tz: str,
    catch_up: CatchUp = "skip",
    max_catch_up: int = 10,
    name: str | None = None,
    description: str = "",
) -> Callable[[TaskFunction], TaskHandle]:
    """Declare a cron task: a cheap function of the occurrence answering (job, input).

    ::

        @task(cron="*/5 * * * *", tz="UTC", catch_up="skip")
        def poll_fleet(occurrence):
            return [(poll_hosts, {"occurrence": occurrence.isoformat()})]

    ``tz`` is required. The scheduler leader calls the function once per occurrence
    and puts the jobs on the queue in the same statement that moves the task's
    watermark; each job's idempotency key gets the occurrence appended.
    """
    schedule = CronSchedule(cron, tz)

    def decorate(func: TaskFunction) -> TaskHandle:
        task_name = name if name is not None else default_name(func)
        if not isinstance(task_name, str) or not task_name or len(task_name) > 200:
            raise TaskDeclarationInvalid(
                "name", task_name, "a non-empty string of at most 200 characters"
            )
        if not inspect.isfunction(func) or (
            "<locals>" in func.__qualname__ and name is None
        ):
            raise TaskDeclarationInvalid(
                "function",
                func,
                "@task decorates a module-level function",
                job=task_name,
            )
        if inspect.iscoroutinefunction(func):
            raise TaskDeclarationInvalid(
                "function",
                func.__qualname__,
                "a task is synchronous and cheap; do async work in a job it enqueues",
                job=task_name,
            )
        try:
            inspect.signature(func).bind(datetime.now(UTC))
        except TypeError:
            raise TaskDeclarationInvalid(
                "function",
                func.__qualname__,
                "a task takes one argument, the occurrence (an aware datetime)",
                job=task_name,
            ) from None
        check_catch_up(catch_up, max_catch_up, task_name)
        if not isinstance(description, str) or len(description) > 255:
            raise TaskDeclarationInvalid(
                "description", description, "at most 255 characters", job=task_name
            )
        definition = TaskDefinition(
            name=task_name,
            func=func,
            schedule=schedule,
            catch_up=catch_up,
            max_catch_up=max_catch_up,
            description=description,
        )
        return task_registry.register(TaskHandle(definition))

    return decorate
