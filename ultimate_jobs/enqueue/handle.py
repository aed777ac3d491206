"""The handle a @job declaration answers: enqueue, using, enqueue_many, describe (H1-H4).

``@job(...)`` checks the declaration (ultimate_jobs.declaration.definition), registers
the job by its durable name and answers its ``JobHandle``, the only way to put the job
on the queue. The handle is not callable: the queue is the only execution surface (H4).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import (
    Concurrency,
    Declaration,
    JobDefinition,
    NoTenant,
    declare,
)
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.enqueue.options import Enqueued, EnqueueOptions, check_options
from ultimate_jobs.enqueue.queues import check_declared
from ultimate_jobs.enqueue.write import enqueue_inputs
from ultimate_jobs.ground.durations import Duration
from ultimate_jobs.ground.exceptions import InvalidArgument


class JobHandle:
    """The surface of one declared job: put it on the queue, or describe it."""

    __slots__ = ("definition", "options")

    def __init__(
        self, definition: JobDefinition, options: EnqueueOptions | None = None
    ) -> None:
        self.definition = definition
        self.options = options or EnqueueOptions()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def func(self) -> Any:
        """The decorated function, for unit tests that call the body with a fake run."""
        return self.definition.func

    def using(self, **options: Any) -> JobHandle:
        """A handle with per-call options: delay, run_at, queue, priority, run_id,
        actor, on_conflict ("return" answers the live job; "error" raises JobDuplicate)."""
        checked = check_options(self.options, options, self.name)
        settings = get_settings()
        if options.get("queue") is not None and settings.QUEUES:
            # QUEUES given: workers serve those (H5), so another queue is a typo
            check_declared(checked.queue or "", settings, job=self.name)
        return JobHandle(self.definition, checked)

    def enqueue(self, **kwargs: Any) -> Enqueued:
        """Put one run on the queue; answers its ids (deduped=True for a held key)."""
        return enqueue_inputs(self, [kwargs], single=True)[0]

    def enqueue_many(
        self, inputs: Iterable[Mapping[str, Any]], **options: Any
    ) -> list[Enqueued]:
        """Put many runs on the queue in one statement; one answer per input, in order."""
        handle = self.using(**options) if options else self
        if handle.options.run_id is not None:
            raise InvalidArgument(
                "run_id",
                handle.options.run_id,
                "run_id names one run; not for enqueue_many",
                job=self.name,
            )
        return enqueue_inputs(handle, list(inputs), single=False)

    def describe(self) -> dict[str, Any]:
        """The manifest entry for this job (J7)."""
        return self.definition.describe()

    def __repr__(self) -> str:
        return f"<JobHandle {self.name}>"


@overload
def job(func: Callable[..., Any], /) -> JobHandle: ...
@overload
def job(
    *,
    idempotency_key: Callable[[dict[str, Any]], str] | None = ...,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant | None = ...,
    name: str | None = ...,
    queue: str = ...,
    priority: int = ...,
    description: str = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration = ...,
    concurrency: int | Concurrency | None = ...,
    on_settled: Callable[[Any], Any] | None = ...,
    retry: Retry | None = ...,
    dead_letter: bool = ...,
    retention: Mapping[str, Any] | None = ...,
    redact: tuple[str, ...] | list[str] | None = ...,
    store_result: bool = ...,
    version: int = ...,
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = ...,
) -> Callable[[Callable[..., Any]], JobHandle]: ...


def job(
    func: Callable[..., Any] | None = None,
    /,
    *,
    idempotency_key: Callable[[dict[str, Any]], str] | None = None,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant | None = None,
    name: str | None = None,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    description: str = "",
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
    event_poll: Duration = 30,
    concurrency: int | Concurrency | None = None,
    on_settled: Callable[[Any], Any] | None = None,
    retry: Retry | None = None,
    dead_letter: bool = True,
    retention: Mapping[str, Any] | None = None,
    redact: tuple[str, ...] | list[str] | None = None,
    store_result: bool = False,
    version: int = 1,
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
) -> JobHandle | Callable[[Callable[..., Any]], JobHandle]:
    """Declare a job; ``idempotency_key`` and ``tenant`` are required (J2, J3).

    ``redact`` names input paths no operator surface shows (``"password"``,
    ``"card.number"``; B5); the body still receives the real values.
    ``store_result=True`` keeps the body's JSON return value, at most
    ``MAX_RESULT_BYTES``, shown by the admin and ``jobs show --json`` (P8).
    ``version=N`` stores N with each input; ``upgrade={n: fn}`` turns a stored
    version-n input into version n+1 when a worker decodes it, so rows enqueued
    before a signature change still run (P11).

    ::

        @job(idempotency_key=lambda p: f"welcome:{p['user_id']}", tenant=NO_TENANT)
        def send_welcome(run, user_id: int) -> None: ...

        send_welcome.enqueue(user_id=42)
    """
    declared = Declaration(
        idempotency_key=idempotency_key,
        tenant=tenant,
        name=name,
        queue=queue,
        priority=priority,
        description=description,
        timeout=timeout,
        step_timeout=step_timeout,
        event_poll=event_poll,
        concurrency=concurrency,
        on_settled=on_settled,
        retry=retry,
        dead_letter=dead_letter,
        retention=retention,
        redact=redact,
        store_result=store_result,
        version=version,
        upgrade=upgrade,
    )
    if func is not None:  # bare @job: both required fields are missing
        return register(func, declared)
    return functools.partial(register, declaration=declared)


def register(func: Callable[..., Any], declaration: Declaration) -> JobHandle:
    """Check ``declaration`` of ``func``, register the job and answer its handle."""
    handle = JobHandle(declare(func, declaration))
    registered = registry.register(handle)  # the first handle of a function seen twice
    return registered if isinstance(registered, JobHandle) else handle
