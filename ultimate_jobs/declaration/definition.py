"""What a job is: the definition ``@job`` freezes, checked field by field (J1-J5).

A job is a module-level function whose first parameter is the run context; the rest is
its input. ``@job`` (ultimate_jobs.enqueue.handle) and the factories hold their options
in one frozen ``Declaration``; ``declare`` checks each of its fields (the shared checks
of ground/validate.py) and answers a ``JobDefinition``, which the handle wraps to
put the job on the queue. Pure: no database, no settings.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast

from django.apps import apps

from ultimate_jobs.declaration.payload import Signature, read_signature
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE, validate_queue
from ultimate_jobs.declaration.redaction import check_paths
from ultimate_jobs.declaration.retention import check_retention
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.bounds import text_problem
from ultimate_jobs.ground.durations import (
    Duration,
    optional_duration,
    parse_duration,
)
from ultimate_jobs.ground.exceptions import (
    IdempotencyRequired,
    InvalidArgument,
    JobDeclarationInvalid,
    JobTenantRequired,
)

WhenBusy = Literal["wait", "fail"]
MAX_KEY_LENGTH = 512
MAX_CONCURRENCY_KEY_LENGTH = 200


class NoTenant:
    """The tenant of a job that belongs to no tenant."""

    _instance: NoTenant | None = None

    def __new__(cls) -> NoTenant:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_TENANT"


NO_TENANT = NoTenant()


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
        validate.whole(
            self.limit, field="concurrency.limit", error=JobDeclarationInvalid
        )
        if self.when_busy not in ("wait", "fail"):
            raise JobDeclarationInvalid(
                "concurrency.when_busy", self.when_busy, "'wait' or 'fail'"
            )


@dataclass(frozen=True, kw_only=True)
class Declaration:
    """The options of one ``@job``, as written: ``declare`` checks each field and
    answers the ``JobDefinition``. Factories (export_rows, webhook, backfill) build
    one too, so every way to declare a job passes the same checks (J1-J5)."""

    idempotency_key: Callable[[dict[str, Any]], str] | None = None
    tenant: Callable[[dict[str, Any]], Any] | NoTenant | None = None
    name: str | None = None
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    description: str = ""
    timeout: Duration | None = None
    step_timeout: Duration | None = None
    event_poll: Duration = 30
    concurrency: int | Concurrency | None = None
    on_settled: Callable[[Any], Any] | None = None
    retry: Retry | None = None
    dead_letter: bool = True
    retention: Mapping[str, Any] | None = None
    redact: tuple[str, ...] | list[str] | None = None
    store_result: bool = False
    version: int = 1
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None


@dataclass(frozen=True, eq=False)
class JobDefinition:
    """Everything declared about one job, checked and normalised (durations in seconds)."""

    name: str
    func: Callable[..., Any]
    idempotency_key: Callable[[dict[str, Any]], str]
    tenant: Callable[[dict[str, Any]], Any] | NoTenant
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
    redact: tuple[str, ...] = ()  # input paths no operator surface shows (B5)
    store_result: bool = False  # keep the body's JSON return value (P8)
    version: int = 1  # the input's version, stored with each row above 1 (P11)
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )  # n -> the function that turns a version-n input into version n+1 (P11)

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
            "tenant": "none" if isinstance(self.tenant, NoTenant) else "per-input",
            "async": self.is_async,
            "input": self.signature.describe(),
            "redact": list(self.redact),
            "store_result": self.store_result,
            "version": self.version,
            "upgrades_from": sorted(self.upgrade),
        }


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
) -> Callable[[dict[str, Any]], Any]:
    if value is None:
        raise error(
            name,
            value,
            f"required: a function of the input ({'or NO_TENANT' if name == 'tenant' else 'returning a non-empty string'})",
            job=job,
        )
    if not callable(value):
        raise error(name, value, "expected a function of the input", job=job)
    return cast(Callable[[dict[str, Any]], Any], value)


def _check_concurrency(value: object, job: str) -> int | Concurrency | None:
    if value is None or isinstance(value, Concurrency):
        return value
    return validate.whole(
        value,
        field="concurrency",
        error=partial(JobDeclarationInvalid, job=job),
        reason="a whole number of at least 1, or Concurrency(...)",
    )


def check_priority(
    value: object,
    *,
    field: str = "priority",
    job: str = "",
    error: type[InvalidArgument] = JobDeclarationInvalid,
) -> int:
    return validate.whole(
        value,
        field=field,
        least=-100,
        most=100,
        error=partial(error, job=job),
        reason="a whole number from -100 to 100 (higher runs first)",
    )


MAX_VERSION = 10_000


def _check_versions(
    version: object, upgrade: object, job: str
) -> tuple[int, dict[int, Callable[[dict[str, Any]], dict[str, Any]]]]:
    """P11: ``version`` a whole number from 1; ``upgrade`` maps each version n below
    it to a function turning a version-n input into version n+1, with no gap up to
    version - 1 (an input older than its first key cannot be upgraded)."""
    refuse = partial(JobDeclarationInvalid, job=job)
    version = validate.whole(version, field="version", most=MAX_VERSION, error=refuse)
    if upgrade is None:
        upgrade = {}
    if not isinstance(upgrade, Mapping):
        raise JobDeclarationInvalid(
            "upgrade", upgrade, "a dict {n: function of a version-n input}", job=job
        )
    steps: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}
    for n, step in upgrade.items():
        validate.whole(
            n,
            field="upgrade",
            most=version - 1,
            error=refuse,
            reason=f"each key is a version from 1 to {version - 1} (version={version})",
        )
        if not callable(step):
            raise JobDeclarationInvalid(
                f"upgrade[{n}]", step, "a function of a version-n input", job=job
            )
        steps[n] = step
    if steps and set(steps) != set(range(min(steps), version)):
        missing = sorted(set(range(min(steps), version)) - set(steps))
        raise JobDeclarationInvalid(
            "upgrade",
            sorted(steps),
            f"no step from version {missing[0]}: each step n -> n+1 up to "
            f"{version - 1} is needed",
            job=job,
        )
    return version, steps


def declare(func: Callable[..., Any], declared: Declaration) -> JobDefinition:
    """Check every field of one ``@job`` declaration; answer the frozen definition."""
    if not callable(func) or not inspect.isfunction(func):
        raise JobDeclarationInvalid(
            "function", func, "@job decorates a module-level function"
        )
    job_name = declared.name if declared.name is not None else default_name(func)
    if (
        not isinstance(job_name, str)
        or not job_name
        or len(job_name) > 200
        or text_problem(job_name) is not None
    ):
        raise JobDeclarationInvalid(
            "name",
            job_name,
            "a non-empty string of at most 200 characters, without NUL",
        )
    if "<locals>" in func.__qualname__ and declared.name is None:
        raise JobDeclarationInvalid(
            "function",
            func.__qualname__,
            "a job is a module-level function (or give it name=)",
            job=job_name,
        )
    refuse = partial(JobDeclarationInvalid, job=job_name)
    idempotency_key = _check_callable(
        "idempotency_key", declared.idempotency_key, job_name, IdempotencyRequired
    )
    tenant = declared.tenant
    if not isinstance(tenant, NoTenant):
        tenant = _check_callable("tenant", tenant, job_name, JobTenantRequired)
    try:
        queue = validate_queue(declared.queue, job=job_name)
    except InvalidArgument as exc:
        raise refuse("queue", declared.queue, exc.reason) from None
    description = declared.description
    if not isinstance(description, str) or len(description) > 255:
        raise refuse(
            "description", description, "one sentence of at most 255 characters"
        )
    on_settled = declared.on_settled
    if on_settled is not None and not callable(on_settled):
        raise refuse("on_settled", on_settled, "a function of the settlement")
    retry = declared.retry if declared.retry is not None else Retry()
    if not isinstance(retry, Retry):
        raise refuse("retry", retry, "a Retry(...)")

    def duration(key: str, value: object) -> float | None:
        return optional_duration(
            value, field=key, job=job_name, error=JobDeclarationInvalid
        )

    signature = read_signature(func, job=job_name)
    version, upgrade = _check_versions(declared.version, declared.upgrade, job_name)
    redact = check_paths(
        declared.redact,
        job=job_name,
        parameters=None
        if signature.accepts_any
        else [p.name for p in signature.parameters],
    )

    return JobDefinition(
        name=job_name,
        func=func,
        idempotency_key=idempotency_key,
        tenant=tenant,
        queue=queue,
        priority=check_priority(declared.priority, job=job_name),
        description=description,
        timeout=duration("timeout", declared.timeout),
        step_timeout=duration("step_timeout", declared.step_timeout),
        event_poll=parse_duration(
            declared.event_poll,
            field="event_poll",
            job=job_name,
            error=JobDeclarationInvalid,
        ),
        concurrency=_check_concurrency(declared.concurrency, job_name),
        on_settled=on_settled,
        retry=retry,
        dead_letter=validate.flag(
            declared.dead_letter, field="dead_letter", error=refuse
        ),
        retention=check_retention(declared.retention, job_name),
        signature=signature,
        is_async=inspect.iscoroutinefunction(func),
        redact=redact,
        store_result=validate.flag(
            declared.store_result, field="store_result", error=refuse
        ),
        version=version,
        upgrade=upgrade,
    )
