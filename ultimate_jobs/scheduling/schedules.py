"""Runtime schedules and the operator verbs of tasks (C6, C7).

``recur`` stores one schedule row per key (again with the same key replaces it),
``unrecur`` removes it; the Schedule model checks itself on save with the errors
``@task`` raises, and tells the scheduler leader, which uses the new row from its next
tick. ``pause_task`` / ``resume_task`` hold a task or schedule back and let it go (the
watermark stays, so a resume catches up per the policy), ``task_fires`` lists the last
fire of each, ``next_run`` answers the next occurrence with no scheduler running, and
``trigger`` fires now, as an ordinary enqueue under each job's own idempotency key:
distinct from every scheduled occurrence, whose keys carry the occurrence.

A name given to these verbs is looked up among declared tasks first, then among
schedule keys (``recur`` refuses a key that a declared task already uses).

With queues on several aliases (Q1) a schedule is kept on the alias that holds its
job's queue, whose scheduler leader fires it; a task fires on every alias its jobs'
queues live on, so pausing or resuming one acts on every alias.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from ultimate_jobs.conf import get_settings, queue_alias, reading_aliases
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.enqueue.options import Enqueued
from ultimate_jobs.enqueue.rows import build_rows
from ultimate_jobs.ground.bounds import check_text, text_problem
from ultimate_jobs.ground.context import correlation_scope
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    InvalidCron,
    InvalidTimezone,
    JobsError,
    TaskDeclarationInvalid,
    TaskNotLoaded,
    TaskRunning,
    UnknownJob,
    UnknownTask,
)
from ultimate_jobs.scheduling.cron import CronSchedule
from ultimate_jobs.scheduling.tasks import (
    CatchUp,
    Entries,
    TaskHandle,
    check_catch_up,
    check_entries,
    task_registry,
)
from ultimate_jobs.sql import QUERIES

if TYPE_CHECKING:
    from ultimate_jobs.models import Schedule


def schedule_alias(job_name: str) -> str:
    """The alias a runtime schedule of ``job_name`` is kept on (Q1): the one that
    holds the job's queue, whose scheduler leader fires it."""
    if job_name not in registry:
        return get_settings().DATABASE
    return queue_alias(registry.get(job_name).definition.queue)


# -- checking a schedule ---------------------------------------------------------------


def _problems(schedule: Schedule) -> list[tuple[str, JobsError]]:
    """Every problem of a schedule row, with the model field it belongs to."""
    problems: list[tuple[str, JobsError]] = []
    # B4: text PostgreSQL cannot hold, or longer than its column, is refused here,
    # before the row is saved (a DataError would abort the caller's transaction).
    for name, limit in (("job", 200), ("cron", 200), ("tz", 64), ("description", 255)):
        value = getattr(schedule, name)
        try:
            check_text(
                value, field=name, max_length=limit, error=TaskDeclarationInvalid
            )
        except TaskDeclarationInvalid as exc:
            problems.append((name, exc))
    if problems:
        return problems
    key = schedule.key
    if (
        not isinstance(key, str)
        or not key
        or len(key) > 200
        or text_problem(key) is not None
    ):
        problems.append(
            (
                "key",
                TaskDeclarationInvalid(
                    "schedule_key",
                    key,
                    "a non-empty string of at most 200 characters, without NUL",
                ),
            )
        )
    elif key in task_registry:
        problems.append(
            (
                "key",
                TaskDeclarationInvalid(
                    "schedule_key", key, "a declared task has this name; pick another"
                ),
            )
        )
    try:
        CronSchedule(schedule.cron, "UTC")
    except InvalidCron as exc:
        problems.append(("cron", exc))
    try:
        CronSchedule("* * * * *", schedule.tz)
    except InvalidTimezone as exc:
        problems.append(("tz", exc))
    try:
        check_catch_up(schedule.catch_up, schedule.max_catch_up, str(key))
    except TaskDeclarationInvalid as exc:
        problems.append((exc.field, exc))
    try:
        job = registry.get(schedule.job)
    except UnknownJob as exc:
        problems.append(("job", exc))
    else:
        try:
            # The input fits; its keys are good.
            build_rows(JobHandle(job.definition), [schedule.input])
        except JobsError as exc:
            problems.append(("input", exc))
    return problems


def check_schedule(schedule: Schedule) -> None:
    """Raise the error a bad schedule deserves: InvalidCron, InvalidTimezone, ..."""
    if problems := _problems(schedule):
        raise problems[0][1]


def schedule_errors(schedule: Schedule) -> None:
    """The same checks as a Django ValidationError per field (the admin's form)."""
    errors: dict[str, list[str]] = {}
    for name, error in _problems(schedule):
        errors.setdefault(name, []).append(str(error))
    if errors:
        raise ValidationError(errors)


def schedules_changed(alias: str) -> None:
    """Tell the scheduler leader (delivered when the caller's transaction commits)."""
    DjangoDatabase(alias).run(QUERIES["scheduler_notify"], payload="schedules")


@receiver(pre_save, sender="ultimate_jobs.Schedule")
def _check_before_save(
    sender: type[Schedule], instance: Schedule, **kwargs: Any
) -> None:
    check_schedule(instance)


@receiver(post_save, sender="ultimate_jobs.Schedule")
def _announce_saved(sender: type[Schedule], instance: Schedule, **kwargs: Any) -> None:
    schedules_changed(str(kwargs.get("using") or instance._state.db or "default"))


@receiver(post_delete, sender="ultimate_jobs.Schedule")
def _forget_schedule(sender: type[Schedule], instance: Schedule, **kwargs: Any) -> None:
    # A receiver, not delete(): the admin's bulk delete does not call Model.delete().
    using = str(kwargs.get("using") or instance._state.db or "default")
    from ultimate_jobs.models import TaskWatermark

    TaskWatermark.objects.using(using).filter(key=instance.watermark_key).delete()
    schedules_changed(using)


# -- runtime schedules -----------------------------------------------------------------


def recur(
    job: JobHandle | str,
    input: Mapping[str, Any] | None = None,
    *,
    cron: str,
    tz: str,
    schedule_key: str,
    catch_up: CatchUp = "skip",
    max_catch_up: int = 10,
    description: str = "",
) -> Schedule:
    """Put ``job`` with ``input`` on the queue on ``cron`` in ``tz``; one row per key.

    ::

        recur(send_digest, {"user_id": 1}, cron="0 9 * * mon-fri",
              tz="Europe/Paris", schedule_key="digest-1")

    Calling it again with the same ``schedule_key`` replaces the schedule. A new cron
    or time zone restarts its watermark (no catch-up of the old cron's occurrences).
    """
    from ultimate_jobs.models import Schedule

    fields = {
        "job": job.name if isinstance(job, JobHandle) else job,
        "input": dict(input) if isinstance(input, Mapping) else input,
        "cron": cron,
        "tz": tz,
        "catch_up": catch_up,
        "max_catch_up": max_catch_up,
        "description": description,
    }
    if fields["input"] is None:
        fields["input"] = {}
    check_schedule(Schedule(key=schedule_key, **fields))  # before touching a row
    alias = schedule_alias(str(fields["job"]))
    # One row per key: a route that moved since the last call moves the schedule.
    _delete(schedule_key, [other for other in reading_aliases() if other != alias])
    schedule, _ = Schedule.objects.using(alias).update_or_create(
        key=schedule_key, defaults=fields
    )
    return schedule


def unrecur(schedule_key: str) -> bool:
    """Remove a runtime schedule and its watermark; answers whether it existed."""
    check_text(
        schedule_key, field="schedule_key", max_length=200, error=InvalidArgument
    )
    return _delete(schedule_key, reading_aliases())  # Q1: on its queue's alias


def _delete(schedule_key: str, aliases: Sequence[str]) -> bool:
    """Delete the schedule ``schedule_key`` on each of ``aliases`` one by one, so the
    receiver forgets each one's watermark; answers whether any existed."""
    from ultimate_jobs.models import Schedule

    found = False
    for alias in aliases:
        with transaction.atomic(using=alias):
            for schedule in Schedule.objects.using(alias).filter(key=schedule_key):
                schedule.delete()
                found = True
    return found


# -- tasks and schedules alike ---------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A task or a schedule, resolved from what the caller named."""

    kind: str  # "task" or "schedule"
    name: str
    schedule: CronSchedule
    entries: Callable[[datetime], Entries]
    # The aliases whose watermark holds it back (Q1): a schedule's own, every alias
    # for a task.
    aliases: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


MAX_TASK_NAME = 255  # a task name or a schedule key, at most


def _target(task: TaskHandle | str) -> Target:
    from ultimate_jobs.models import Schedule

    if isinstance(task, TaskHandle):
        task = task.name
    # B4: a name PostgreSQL cannot hold is refused before the lookups (issue 31).
    check_text(task, field="task", max_length=MAX_TASK_NAME)
    if task in task_registry:
        handle = task_registry.get(task)
        d = handle.definition
        return Target(
            "task",
            d.name,
            CronSchedule(d.schedule.expression, d.schedule.tz),
            handle.entries,
            reading_aliases(),
        )
    for alias in reading_aliases():
        row = Schedule.objects.using(alias).filter(key=task).first()
        if row is not None:
            break
    else:
        return _recorded_task(task)

    def entries(occurrence: datetime) -> Entries:
        return check_entries(row.key, [(registry.get(row.job), dict(row.input or {}))])

    return Target(
        "schedule", row.key, CronSchedule(row.cron, row.tz), entries, (alias,)
    )


def _recorded_task(name: str) -> Target:
    """A task a scheduler recorded (its watermark row keeps its cron and zone) whose
    code this process has not imported (issue 16 item 9: a web process older than the
    deploy). Pause, resume and next run work from the row; a fire needs the code."""
    from ultimate_jobs.models import TaskWatermark

    mark = (
        TaskWatermark.objects.using(get_settings().DATABASE)
        .filter(key=f"task:{name}")
        .first()
    )
    cron, _, tz = mark.spec.rpartition(" ") if mark is not None else ("", "", "")
    if mark is None or not cron:
        raise UnknownTask(name)

    def entries(occurrence: datetime) -> Entries:
        raise TaskNotLoaded(name)

    return Target("task", name, CronSchedule(cron, tz), entries, reading_aliases())


def pause_task(task: TaskHandle | str, *, by: str = "") -> bool:
    """Hold a task (or schedule) back from its very next occurrence on; answers
    whether it was running. Its watermark stays, so ``resume_task`` catches up."""
    target = _target(task)
    by = check_text(str(by)[:255], field="by", max_length=255)
    paused = [
        DjangoDatabase(alias).run(
            QUERIES["task_pause"],
            key=target.key,
            kind=target.kind,
            name=target.name,
            paused_by=by,
            now=None,
        )
        for alias in target.aliases
    ]
    return any(paused)


def resume_task(task: TaskHandle | str) -> bool:
    """Let a paused task fire again: what it missed fires per its catch-up policy at
    the leader's next tick. Answers whether it was paused."""
    target = _target(task)
    resumed = [
        DjangoDatabase(alias).run(QUERIES["task_resume"], key=target.key)
        for alias in target.aliases
    ]
    return any(resumed)


def next_run(task: TaskHandle | str, after: datetime | None = None) -> datetime:
    """The next occurrence after ``after`` (default now), in the task's time zone;
    no scheduler needs to run."""
    target = _target(task)
    return target.schedule.local(target.schedule.next_after(after or datetime.now(UTC)))


def next_run_of(cron: str, tz: str, after: datetime | None = None) -> datetime:
    """The next occurrence of a cron in a time zone after ``after`` (default now)."""
    schedule = CronSchedule(cron, tz)
    return schedule.local(schedule.next_after(after or datetime.now(UTC)))


def trigger(
    task: TaskHandle | str, *, actor: Any = None, force: bool = False
) -> list[Enqueued]:
    """Fire a task (or schedule) now: its entries for this instant, enqueued under each
    job's own idempotency key, so a manual fire never collides with a scheduled one.

    A manual fire never overlaps a run of the same task in progress (C7, seed
    "multi-replica deployments"): while a job that the task fired (on its schedule or
    by hand) is live, it is refused with TaskRunning and nothing is enqueued, unless
    ``force=True``. Its jobs carry the correlation id ``<task:name>@<instant>``, the
    shape a scheduled fire's carry, which is how the next trigger finds them.
    """
    target = _target(task)
    now = datetime.now(UTC).replace(microsecond=0)
    pairs = target.entries(now)
    if not force and (live := live_runs(target, {h.name for h, _ in pairs})):
        raise TaskRunning(target.name, live)
    # Published at once (not staged in the outbox), so the answer says what deduped.
    with correlation_scope(f"{target.key}@{now.isoformat()}"[:255]):
        return [
            (handle.using(actor=actor) if actor is not None else handle).enqueue(
                **kwargs
            )
            for handle, kwargs in pairs
        ]


def live_runs(target: Target, names: set[str]) -> list[Any]:
    """The live jobs (at most 10) a task or schedule fired: jobs of ``names`` whose
    correlation id says this target fired them (``<kind>:<name>@<instant>``)."""
    if not names:
        return []
    from ultimate_jobs.models import LIVE_STATES, Job
    from ultimate_jobs.models.jobs import fired_by

    live: list[Any] = []
    for alias in reading_aliases():  # Q1: its jobs' queues may live on any alias
        live += (
            Job.objects.using(alias)
            .filter(
                fired_by(f"{target.key}@"),
                name__in=sorted(names),
                state__in=LIVE_STATES,
            )
            .order_by("id")
            .values_list("id", flat=True)[:10]
        )
    return sorted(live)[:10]


@dataclass(frozen=True)
class TaskFire:
    """One task or schedule and its last fire (``task_fires()``)."""

    kind: str
    name: str
    cron: str
    tz: str
    catch_up: str
    paused: bool
    watermark: datetime | None  # every occurrence up to here is done
    last_occurrence: datetime | None  # the occurrence the last fire was for
    last_fired_at: datetime | None
    fires: int
    next_run: datetime | None


def task_fires() -> list[TaskFire]:
    """Every declared task and stored schedule with its last fire, by kind and name."""
    from ultimate_jobs.models import Schedule, TaskWatermark

    marks: dict[str, TaskWatermark] = {}
    schedules: list[Schedule] = []
    for alias in reading_aliases():  # Q1: a task's first alias that knows it
        for found in TaskWatermark.objects.using(alias):
            marks.setdefault(found.key, found)
        schedules += Schedule.objects.using(alias)
    now = datetime.now(UTC)
    out: list[TaskFire] = []
    known: list[tuple[str, str, str, str, str]] = [
        (
            "task",
            h.name,
            h.definition.schedule.expression,
            h.definition.schedule.tz,
            h.definition.catch_up,
        )
        for h in task_registry
    ]
    known += [
        ("schedule", s.key, s.cron, s.tz, s.catch_up)
        for s in sorted(schedules, key=lambda s: s.key)
    ]
    for kind, name, cron, tz, catch_up in known:
        mark = marks.get(f"{kind}:{name}")
        try:
            schedule = CronSchedule(cron, tz)
            upcoming: datetime | None = schedule.local(schedule.next_after(now))
        except JobsError:
            upcoming = None
        out.append(
            TaskFire(
                kind=kind,
                name=name,
                cron=cron,
                tz=tz,
                catch_up=catch_up,
                paused=bool(mark and mark.paused),
                watermark=mark.last_occurrence if mark else None,
                last_occurrence=mark.last_fired_occurrence if mark else None,
                last_fired_at=mark.last_fired_at if mark else None,
                fires=mark.fires if mark else 0,
                next_run=upcoming,
            )
        )
    return out
