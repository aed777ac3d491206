"""factory_boy factories for the package's tables, for tests of projects that use it.

Each factory builds a row through the real model (``DjangoModelFactory``) on the jobs
database (the ``DATABASE`` setting's alias), with the fields the worker would have
written for the state asked for::

    from ultimate_jobs.testing.factories import JobFactory

    JobFactory(job=send_welcome, input={"user_id": 1})       # ready, due now
    JobFactory(job=send_welcome, running=True)                # a live lease, a claim token
    JobFactory(job=send_welcome, dead=True, error="SMTP 550") # attempts spent, a traceback
    JobFactory(job=send_welcome, done=True, steps=["render", "send"])

The states are traits (``Trait``): ``ready`` (the default), ``delayed``,
``running``, ``suspended``, ``done``, ``failed``, ``dead`` and ``cancelled``. Any field
passed explicitly wins over the trait's. ``job=`` takes a declared job's handle (or its
name) and copies its name, queue, priority and ``Retry.attempts``; without it, the job
is named ``factory.job<n>``, which no worker knows.

The other factories: ``JobStepFactory`` (a done step by default; ``sleeping``,
``waiting`` and ``timed_out`` traits), ``OutboxMessageFactory`` (staged in the current
transaction; ``claimed``, ``published``), ``ScheduleFactory`` (saved through the
model's checks, so a bad cron raises ``InvalidCron`` as ``recur`` would),
``WorkerFactory`` (alive; ``expired``), ``EventFactory`` (matchable; ``expired``),
``LeaseFactory`` (a held concurrency slot) and ``TaskWatermarkFactory``.

factory-boy is a test dependency: this module is shipped with the package but imports
only where factory-boy is installed (``pip install factory-boy``); ``import
ultimate_jobs.testing`` does not need it. docs/testing.md has the whole list.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar

try:
    from factory.declarations import (
        LazyAttribute,
        LazyAttributeSequence,
        LazyFunction,
        SelfAttribute,
        Sequence,
        SubFactory,
        Trait,
    )
    from factory.django import DjangoModelFactory
    from factory.helpers import post_generation
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "ultimate_jobs.testing.factories needs factory-boy, a test dependency: "
        "pip install 'factory-boy>=3.3'"
    ) from exc

from django.db import connections
from django.db.models import Manager, Model
from django.utils import timezone

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.states import JobState, StepKind, StepStatus
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.models import (
    Event,
    Job,
    JobStep,
    Lease,
    OutboxMessage,
    Schedule,
    TaskWatermark,
    Worker,
)
from ultimate_jobs.runtime.settle import format_error

__all__ = [
    "EventFactory",
    "JobFactory",
    "JobStepFactory",
    "LeaseFactory",
    "OutboxMessageFactory",
    "ScheduleFactory",
    "TaskWatermarkFactory",
    "WorkerFactory",
]

M = TypeVar("M", bound=Model)

HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)
WORKER_HOST = "factory-host"


def _now() -> datetime:
    return timezone.now()


def _lease() -> timedelta:
    """The configured visibility timeout (LEASE), as a worker's claim would take it."""
    return timedelta(seconds=get_settings().LEASE)


def _job_name(handle: JobHandle | str | None, n: int) -> str:
    if isinstance(handle, JobHandle):
        return handle.name
    return handle or f"factory.job{n}"


def _attempts(o: Any, default: int) -> int:
    """A declared job's ``Retry.attempts``; ``default`` for a bare name."""
    return o.job.definition.retry.attempts if isinstance(o.job, JobHandle) else default


def _traceback(message: str) -> str:
    """A stored error as the worker writes it (class, message, traceback, bounded)."""
    try:
        raise RuntimeError(message)
    except RuntimeError as error:
        return format_error(error)


def _current_transaction() -> int:
    """The id of the transaction the row is staged in, as the staging statement
    records it (O3: rows of one transaction are published in order)."""
    with connections[get_settings().DATABASE].cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _make_steps(
    job: Job,
    create: bool,  # noqa: FBT001 - factory_boy's hook signature
    extracted: int | Iterable[str] | None,
    **kwargs: Any,
) -> None:
    """``JobFactory(steps=["a", "b"])`` (or ``steps=2``): done steps of the job's
    attempt; ``steps__output=...`` goes to each step."""
    if not extracted:
        return
    names = (
        [f"step-{i}" for i in range(extracted)]
        if isinstance(extracted, int)
        else list(extracted)
    )
    make = JobStepFactory.create if create else JobStepFactory.build
    for name in names:
        make(job=job, name=name, attempt=max(job.attempt, 1), **kwargs)


class JobsModelFactory(DjangoModelFactory[M]):
    """Rows go to the jobs database (``ULTIMATE_JOBS["DATABASE"]``), read at create."""

    class Meta:
        abstract = True
        skip_postgeneration_save = True

    @classmethod
    def _get_manager(cls, model_class: type[M]) -> Manager[M]:
        manager: Manager[M] = model_class._default_manager
        return manager.db_manager(get_settings().DATABASE)


class JobFactory(JobsModelFactory[Job]):
    """A job in any state; ``job=`` a declared job's handle or name."""

    class Meta:
        model = Job

    class Params:
        job: JobHandle | str | None = None
        error = "the job failed"  # the dead and failed traits' message
        ready = Trait(state=JobState.READY)  # the default: due now
        delayed = Trait(
            state=JobState.DELAYED,
            run_at=LazyFunction(lambda: _now() + HOUR),
        )
        running = Trait(
            state=JobState.RUNNING,
            attempt=1,
            started_at=LazyFunction(_now),
            lease_owner=LazyFunction(uuid.uuid4),  # the claim token (W3)
            lease_expires_at=LazyAttribute(lambda o: o.started_at + _lease()),
            worker_id=f"{WORKER_HOST}:1:factory",
        )
        suspended = Trait(
            state=JobState.SUSPENDED,
            attempt=1,
            started_at=LazyFunction(lambda: _now() - SECOND),
            run_at=LazyFunction(lambda: _now() + HOUR),  # when it wakes
        )
        done = Trait(
            state=JobState.DONE,
            attempt=1,
            finished_at=LazyFunction(_now),
            started_at=LazyAttribute(lambda o: o.finished_at - SECOND),
        )
        failed = Trait(
            state=JobState.FAILED,
            attempt=1,
            finished_at=LazyFunction(_now),
            started_at=LazyAttribute(lambda o: o.finished_at - SECOND),
            last_error=LazyAttribute(lambda o: _traceback(o.error)),
            stop_reason="terminal",
        )
        dead = Trait(
            state=JobState.DEAD,
            max_attempts=LazyAttribute(lambda o: _attempts(o, 3)),
            attempt=SelfAttribute("max_attempts"),
            finished_at=LazyFunction(_now),
            started_at=LazyAttribute(lambda o: o.finished_at - SECOND),
            last_error=LazyAttribute(lambda o: _traceback(o.error)),
            stop_reason="attempts-exhausted",
        )
        cancelled = Trait(
            state=JobState.CANCELLED,
            finished_at=LazyFunction(_now),
            stop_reason="cancelled",
            last_error="cancelled by factory",
        )

    name = LazyAttributeSequence(lambda o, n: _job_name(o.job, n))
    queue = LazyAttribute(
        lambda o: o.job.definition.queue if isinstance(o.job, JobHandle) else "default"
    )
    priority = LazyAttribute(
        lambda o: o.job.definition.priority if isinstance(o.job, JobHandle) else 0
    )
    max_attempts = LazyAttribute(lambda o: _attempts(o, 1))
    state = JobState.READY
    input = LazyFunction(dict)
    idempotency_key = Sequence(lambda n: f"factory-{n}")

    steps = post_generation(_make_steps)


class JobStepFactory(JobsModelFactory[JobStep]):
    """A step of a job: done with its output by default (S1)."""

    class Meta:
        model = JobStep

    class Params:
        sleeping = Trait(
            kind=StepKind.SLEEP,
            status=StepStatus.WAITING,
            finished_at=None,
            wake_at=LazyFunction(lambda: _now() + HOUR),
        )
        waiting = Trait(
            kind=StepKind.EVENT,
            status=StepStatus.WAITING,
            finished_at=None,
            event="factory.event",
            match=LazyFunction(dict),
            wake_at=LazyFunction(lambda: _now() + HOUR),  # the timeout
        )
        timed_out = Trait(
            kind=StepKind.EVENT,
            status=StepStatus.TIMED_OUT,
            event="factory.event",
            match=LazyFunction(dict),
            wake_at=LazyFunction(_now),
        )

    job = SubFactory(JobFactory, running=True)
    name = Sequence(lambda n: f"step-{n}")
    kind = StepKind.STEP
    status = StepStatus.DONE
    output = None
    attempt = LazyAttribute(lambda o: max(o.job.attempt, 1))
    finished_at = LazyFunction(_now)
    started_at = LazyFunction(lambda: _now() - SECOND)


class OutboxMessageFactory(JobsModelFactory[OutboxMessage]):
    """A job staged in the current transaction, not yet claimed by a relay (O1)."""

    class Meta:
        model = OutboxMessage

    class Params:
        job: JobHandle | str | None = None
        claimed = Trait(
            claimed_at=LazyFunction(_now),
            claimed_by="factory-relay",
            claims=1,
        )
        published = Trait(
            claimed_at=LazyFunction(lambda: _now() - SECOND),
            claimed_by="factory-relay",
            claims=1,
            published_at=LazyFunction(_now),
        )

    name = LazyAttributeSequence(lambda o, n: _job_name(o.job, n))
    queue = LazyAttribute(
        lambda o: o.job.definition.queue if isinstance(o.job, JobHandle) else "default"
    )
    max_attempts = LazyAttribute(lambda o: _attempts(o, 1))
    input = LazyFunction(dict)
    idempotency_key = Sequence(lambda n: f"factory-{n}")
    run_at = LazyFunction(_now)
    staged_tx = LazyFunction(_current_transaction)


class ScheduleFactory(JobsModelFactory[Schedule]):
    """A runtime schedule (C6), checked on save like ``recur``; by default the app's
    own purge every five minutes (pass ``job=`` a handle or a declared name)."""

    class Meta:
        model = Schedule

    key = Sequence(lambda n: f"factory-schedule-{n}")
    job = "ultimate_jobs.purge"
    input = LazyFunction(dict)
    cron = "*/5 * * * *"
    tz = "UTC"

    @classmethod
    def _adjust_kwargs(cls, **kwargs: Any) -> dict[str, Any]:
        if isinstance(kwargs.get("job"), JobHandle):
            kwargs["job"] = kwargs["job"].name
        return kwargs


class WorkerFactory(JobsModelFactory[Worker]):
    """A live worker row (W8): it heartbeat now and expires one lease later."""

    class Meta:
        model = Worker

    class Params:
        expired = Trait(
            heartbeat_at=LazyFunction(lambda: _now() - 2 * _lease()),
            expires_at=LazyFunction(lambda: _now() - SECOND),
        )

    pid = Sequence(lambda n: 10_000 + n)
    id = LazyAttribute(lambda o: f"{o.host}:{o.pid}:factory")
    host = WORKER_HOST
    started_at = LazyFunction(lambda: _now() - HOUR)
    queues = LazyFunction(lambda: ["default"])
    slots = LazyFunction(lambda: get_settings().CONCURRENCY)
    in_flight = LazyFunction(list)
    heartbeat_at = LazyFunction(_now)
    expires_at = LazyAttribute(lambda o: o.heartbeat_at + _lease())


class EventFactory(JobsModelFactory[Event]):
    """A published event (S4), matchable until it expires (a day from now)."""

    class Meta:
        model = Event

    class Params:
        expired = Trait(expires_at=LazyFunction(lambda: _now() - SECOND))

    name = "factory.event"
    payload = LazyFunction(dict)
    tenant_id = None
    expires_at = LazyFunction(lambda: _now() + timedelta(days=1))


class LeaseFactory(JobsModelFactory[Lease]):
    """One held slot of a concurrency limit (L1): ``job:<name>``, slot 0, held by a
    fresh claim token for one lease."""

    class Meta:
        model = Lease

    name = Sequence(lambda n: f"factory.job{n}")
    key = LazyAttribute(lambda o: f"job:{o.name}")
    slot = 0
    holder = LazyFunction(uuid.uuid4)
    job_id = LazyFunction(uuid.uuid4)
    acquired_at = LazyFunction(_now)
    expires_at = LazyAttribute(lambda o: o.acquired_at + _lease())


class TaskWatermarkFactory(JobsModelFactory[TaskWatermark]):
    """A cron task's durable progress (C4): every occurrence up to
    ``last_occurrence`` (this minute by default) is done."""

    class Meta:
        model = TaskWatermark

    name = Sequence(lambda n: f"factory.task{n}")
    kind = "task"
    key = LazyAttribute(lambda o: f"{o.kind}:{o.name}")
    spec = "* * * * * UTC"
    last_occurrence = LazyFunction(lambda: _now().replace(second=0, microsecond=0))
