"""Declaring jobs: the @job decorator, the definition it freezes, and the registry (J1-J7).

A job is a module-level function whose first parameter is the run context; the rest is
its input. ``@job(...)`` checks every field where it is written and answers a
``JobHandle``, the only way to put the job on the queue. The handle is not callable:
the queue is the only execution surface (H4).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from django.apps import apps

from ultimate_jobs.durations import Duration, optional_duration, parse_duration
from ultimate_jobs.exceptions import (
    IdempotencyRequired,
    InvalidArgument,
    JobDeclarationInvalid,
    JobNameTaken,
    JobTenantRequired,
    UnknownJob,
)
from ultimate_jobs.payload import Signature, read_signature
from ultimate_jobs.queues import DEFAULT_QUEUE, validate_queue
from ultimate_jobs.retry import Retry

if TYPE_CHECKING:
    from ultimate_jobs.handle import JobHandle

WhenBusy = Literal["wait", "fail"]
RETENTION_STATES = ("done", "failed", "dead", "cancelled")
MAX_KEY_LENGTH = 512
MAX_CONCURRENCY_KEY_LENGTH = 200


class _NoTenant:
    """The tenant of a job that belongs to no tenant."""

    _instance: _NoTenant | None = None

    def __new__(cls) -> _NoTenant:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_TENANT"


NO_TENANT = _NoTenant()


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most ``limit`` runs per key, fleet-wide (L2)."""

    key: Callable[[dict[str, Any]], str]
    limit: int = 1
    when_busy: WhenBusy = "wait"

    def __post_init__(self) -> None:
        if not callable(self.key):
            raise JobDeclarationInvalid(
                "concurrency.key", self.key, "a function of the input"
            )
        if (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or self.limit < 1
        ):
            raise JobDeclarationInvalid(
                "concurrency.limit", self.limit, "a whole number of at least 1"
            )
        if self.when_busy not in ("wait", "fail"):
            raise JobDeclarationInvalid(
                "concurrency.when_busy", self.when_busy, "'wait' or 'fail'"
            )


@dataclass(frozen=True, eq=False)
class JobDefinition:
    """Everything declared about one job, checked and normalised (durations in seconds)."""

    name: str
    func: Callable[..., Any]
    idempotency_key: Callable[[dict[str, Any]], str]
    tenant: Callable[[dict[str, Any]], Any] | _NoTenant
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    description: str = ""
    timeout: float | None = None
    step_timeout: float | None = None
    event_poll: float = 30.0
    concurrency: int | Concurrency | None = None
    on_settled: Callable[[Any], Any] | None = None
    retry: Retry = field(default_factory=Retry)
    dead_letter: bool = True
    retention: Mapping[str, Any] = field(default_factory=dict)
    signature: Signature = field(
        default_factory=lambda: Signature((), accepts_any=False)
    )
    is_async: bool = False

    @property
    def origin(self) -> str:
        """Where the function is defined, e.g. ``myapp.jobs.onboard_org``."""
        return f"{self.func.__module__}.{self.func.__qualname__}"

    def describe(self) -> dict[str, Any]:
        """The manifest entry for this job (J7)."""
        concurrency: Any = self.concurrency
        if isinstance(concurrency, Concurrency):
            concurrency = {
                "limit": concurrency.limit,
                "when_busy": concurrency.when_busy,
                "keyed": True,
            }
        return {
            "kind": "job",
            "name": self.name,
            "origin": self.origin,
            "queue": self.queue,
            "priority": self.priority,
            "description": self.description,
            "retry": {
                "attempts": self.retry.attempts,
                "backoff": self.retry.backoff,
                "delay": self.retry.delay_seconds,
                "max_delay": self.retry.max_delay_seconds,
                "jitter": self.retry.jitter,
            },
            "dead_letter": self.dead_letter,
            "timeout": self.timeout,
            "step_timeout": self.step_timeout,
            "event_poll": self.event_poll,
            "concurrency": concurrency,
            "tenant": "none" if isinstance(self.tenant, _NoTenant) else "per-input",
            "async": self.is_async,
            "input": self.signature.describe(),
        }


class Registry:
    """Every job registered in this process, by its durable name (J4, J7)."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobHandle] = {}

    def register(self, handle: JobHandle) -> JobHandle:
        """Register a handle; the same function seen twice is one registration."""
        existing = self._jobs.get(handle.name)
        if existing is not None:
            if existing.definition.origin == handle.definition.origin:
                return existing
            raise JobNameTaken(
                handle.name, existing.definition.origin, handle.definition.origin
            )
        self._jobs[handle.name] = handle
        return handle

    def unregister(self, name: str) -> None:
        """Forget a job (tests that declare jobs on the fly)."""
        self._jobs.pop(name, None)

    def get(self, name: str) -> JobHandle:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[JobHandle]:
        return iter(sorted(self._jobs.values(), key=lambda h: h.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def queues(self) -> list[str]:
        """Every queue a registered job declares (the default of QUEUES, H5)."""
        return sorted({h.definition.queue for h in self._jobs.values()})

    def describe(self) -> list[dict[str, Any]]:
        return [handle.describe() for handle in self]


registry = Registry()


def default_name(func: Callable[..., Any]) -> str:
    """``<app_label>.<function>``, or ``<module>.<function>`` outside any installed app."""
    module = func.__module__
    if apps.apps_ready:
        app = apps.get_containing_app_config(module)
        if app is not None:
            return f"{app.label}.{func.__name__}"
    return f"{module}.{func.__name__}"


def _check_callable(
    name: str, value: object, job: str, error: type[JobDeclarationInvalid]
) -> None:
    if value is None:
        raise error(
            name,
            value,
            f"required: a function of the input ({'or NO_TENANT' if name == 'tenant' else 'returning a non-empty string'})",
            job=job,
        )
    if not callable(value):
        raise error(name, value, "expected a function of the input", job=job)


def _check_retention(value: object, job: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise JobDeclarationInvalid(
            "retention", value, "a mapping like {'done': {'days': 3}}", job=job
        )
    out: dict[str, Any] = {}
    for state, rule in value.items():
        where = f"retention.{state}"
        if state not in RETENTION_STATES:
            raise JobDeclarationInvalid(
                where, rule, f"state is one of {', '.join(RETENTION_STATES)}", job=job
            )
        if rule is False:
            out[state] = False
            continue
        if not isinstance(rule, Mapping) or not rule or set(rule) - {"last", "days"}:
            raise JobDeclarationInvalid(
                where, rule, "{'last': n}, {'days': n}, both, or False", job=job
            )
        last, days = rule.get("last"), rule.get("days")
        if last is not None and (
            isinstance(last, bool) or not isinstance(last, int) or last < 1
        ):
            raise JobDeclarationInvalid(
                f"{where}.last", last, "a whole number of at least 1", job=job
            )
        if days is not None and (
            isinstance(days, bool) or not isinstance(days, int | float) or days <= 0
        ):
            raise JobDeclarationInvalid(
                f"{where}.days", days, "a positive number of days", job=job
            )
        out[state] = dict(rule)
    return out


def _check_concurrency(value: object, job: str) -> int | Concurrency | None:
    if value is None or isinstance(value, Concurrency):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobDeclarationInvalid(
            "concurrency",
            value,
            "a whole number of at least 1, or Concurrency(...)",
            job=job,
        )
    return value


def _check_priority(
    value: object,
    *,
    field: str = "priority",
    job: str = "",
    error: type[InvalidArgument] = JobDeclarationInvalid,
) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not -100 <= value <= 100
    ):
        raise error(
            field, value, "a whole number from -100 to 100 (higher runs first)", job=job
        )
    return value


check_priority = _check_priority


@overload
def job(func: Callable[..., Any], /) -> JobHandle: ...
@overload
def job(
    *,
    idempotency_key: Callable[[dict[str, Any]], str] | None = ...,
    tenant: Callable[[dict[str, Any]], Any] | _NoTenant | None = ...,
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
) -> Callable[[Callable[..., Any]], JobHandle]: ...


def job(
    func: Callable[..., Any] | None = None,
    /,
    *,
    idempotency_key: Callable[[dict[str, Any]], str] | None = None,
    tenant: Callable[[dict[str, Any]], Any] | _NoTenant | None = None,
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
) -> JobHandle | Callable[[Callable[..., Any]], JobHandle]:
    """Declare a job; ``idempotency_key`` and ``tenant`` are required (J2, J3).

    ::

        @job(idempotency_key=lambda p: f"welcome:{p['user_id']}", tenant=NO_TENANT)
        def send_welcome(run, user_id: int) -> None: ...

        send_welcome.enqueue(user_id=42)
    """
    if func is not None:  # bare @job: both required fields are missing
        return _declare(
            func,
            idempotency_key=None,
            tenant=None,
            name=None,
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
        )

    def decorate(function: Callable[..., Any]) -> JobHandle:
        return _declare(
            function,
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
        )

    return decorate


def _declare(func: Callable[..., Any], **fields: Any) -> JobHandle:
    from ultimate_jobs.handle import JobHandle

    if not callable(func) or not inspect.isfunction(func):
        raise JobDeclarationInvalid(
            "function", func, "@job decorates a module-level function"
        )
    job_name = fields["name"] if fields["name"] is not None else default_name(func)
    if not isinstance(job_name, str) or not job_name or len(job_name) > 200:
        raise JobDeclarationInvalid(
            "name", job_name, "a non-empty string of at most 200 characters"
        )
    if "<locals>" in func.__qualname__ and fields["name"] is None:
        raise JobDeclarationInvalid(
            "function",
            func.__qualname__,
            "a job is a module-level function (or give it name=)",
            job=job_name,
        )
    _check_callable(
        "idempotency_key", fields["idempotency_key"], job_name, IdempotencyRequired
    )
    if not isinstance(fields["tenant"], _NoTenant):
        _check_callable("tenant", fields["tenant"], job_name, JobTenantRequired)
    try:
        queue = validate_queue(fields["queue"], job=job_name)
    except InvalidArgument as exc:
        raise JobDeclarationInvalid(
            "queue", fields["queue"], exc.reason, job=job_name
        ) from None
    description = fields["description"]
    if not isinstance(description, str) or len(description) > 255:
        raise JobDeclarationInvalid(
            "description",
            description,
            "one sentence of at most 255 characters",
            job=job_name,
        )
    if not isinstance(fields["dead_letter"], bool):
        raise JobDeclarationInvalid(
            "dead_letter", fields["dead_letter"], "True or False", job=job_name
        )
    on_settled = fields["on_settled"]
    if on_settled is not None and not callable(on_settled):
        raise JobDeclarationInvalid(
            "on_settled", on_settled, "a function of the settlement", job=job_name
        )
    retry = fields["retry"] if fields["retry"] is not None else Retry()
    if not isinstance(retry, Retry):
        raise JobDeclarationInvalid("retry", retry, "a Retry(...)", job=job_name)

    def duration(key: str) -> float | None:
        return optional_duration(
            fields[key], field=key, job=job_name, error=JobDeclarationInvalid
        )

    definition = JobDefinition(
        name=job_name,
        func=func,
        idempotency_key=fields["idempotency_key"],
        tenant=fields["tenant"],
        queue=queue,
        priority=_check_priority(fields["priority"], job=job_name),
        description=description,
        timeout=duration("timeout"),
        step_timeout=duration("step_timeout"),
        event_poll=parse_duration(
            fields["event_poll"],
            field="event_poll",
            job=job_name,
            error=JobDeclarationInvalid,
        ),
        concurrency=_check_concurrency(fields["concurrency"], job_name),
        on_settled=on_settled,
        retry=retry,
        dead_letter=fields["dead_letter"],
        retention=_check_retention(fields["retention"], job_name),
        signature=read_signature(func, job=job_name),
        is_async=inspect.iscoroutinefunction(func),
    )
    return registry.register(JobHandle(definition))
