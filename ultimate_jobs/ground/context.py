"""Context variables a job body and an enqueue site read: the tenant and correlation id."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextvars import ContextVar, Token

_tenant: ContextVar[str | None] = ContextVar("ultimate_jobs_tenant", default=None)
# The name of the job whose body (or on_settled hook) runs here; None outside one.
_job: ContextVar[str | None] = ContextVar("ultimate_jobs_job", default=None)
_correlation: ContextVar[str] = ContextVar("ultimate_jobs_correlation_id", default="")


def current_tenant() -> str | None:
    """The tenant the current job runs under (J3); None outside a job or for NO_TENANT."""
    return _tenant.get()


@contextlib.contextmanager
def tenant_scope(tenant_id: str | None) -> Iterator[None]:
    """Run a block under ``tenant_id``; restores the previous tenant on exit."""
    token = _tenant.set(tenant_id)
    try:
        yield
    finally:
        _tenant.reset(token)


def current_job() -> str | None:
    """The name of the job whose body runs here; None outside a job body."""
    return _job.get()


@contextlib.contextmanager
def job_scope(name: str, tenant_id: str | None) -> Iterator[None]:
    """Run a job's body (or its on_settled hook): its name and its tenant, which the
    tenant guard (ultimate_jobs.tenancy, B7) reads."""
    job_token = _job.set(name)
    tenant_token = _tenant.set(tenant_id)
    try:
        yield
    finally:
        _tenant.reset(tenant_token)
        _job.reset(job_token)


def enter_attempt(
    name: str, tenant_id: str | None, correlation_id: str
) -> tuple[Token[str | None], Token[str | None], Token[str]]:
    """``job_scope`` and ``correlation_scope`` entered at once, without a generator
    context manager each (N2: the executor does it once per job); ``leave_attempt``
    with the answer restores what was there before, in the reverse order."""
    return _job.set(name), _tenant.set(tenant_id), _correlation.set(correlation_id)


def leave_attempt(
    tokens: tuple[Token[str | None], Token[str | None], Token[str]],
) -> None:
    job_token, tenant_token, correlation_token = tokens
    _correlation.reset(correlation_token)
    _tenant.reset(tenant_token)
    _job.reset(job_token)


def current_correlation_id() -> str:
    """The correlation id an enqueue made here would record (M2).

    The one a ``correlation_scope`` (or the correlation middleware) set; else, when
    OpenTelemetry is installed and a span is current, that span's W3C ``traceparent``;
    else ''.
    """
    return _correlation.get() or current_traceparent()


def current_traceparent() -> str:
    """The W3C ``traceparent`` of the current OpenTelemetry span ('' without one, or
    when the ``opentelemetry-api`` package is not installed)."""
    # Never imported here (issue 26): a process under a span has imported it already.
    otel_trace = sys.modules.get("opentelemetry.trace")
    if otel_trace is None:
        return ""
    span = otel_trace.get_current_span().get_span_context()
    if not span.is_valid:
        return ""
    return f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.trace_flags:02x}"


@contextlib.contextmanager
def correlation_scope(correlation_id: str) -> Iterator[None]:
    """Record ``correlation_id`` on every job enqueued inside the block (M2)."""
    token = _correlation.set(correlation_id)
    try:
        yield
    finally:
        _correlation.reset(token)


# B7: the reason of the cross_tenant block the code runs in; None outside one.
_crossing: ContextVar[str | None] = ContextVar(
    "ultimate_jobs_cross_tenant", default=None
)


def current_crossing() -> str | None:
    """The reason of the ``cross_tenant(reason=...)`` block running here, or None."""
    return _crossing.get()


@contextlib.contextmanager
def crossing_scope(reason: str | None) -> Iterator[None]:
    """Run a block with the tenant guard lifted for ``reason`` (None: not lifted);
    ``ultimate_jobs.tenancy.cross_tenant`` checks the reason and logs it."""
    token = _crossing.set(reason)
    try:
        yield
    finally:
        _crossing.reset(token)


def guard_scope() -> tuple[str | None, str | None, str | None]:
    """What the tenant guard reads here: (job name, tenant, crossing reason)."""
    return _job.get(), _tenant.get(), _crossing.get()


@contextlib.contextmanager
def restored_guard_scope(
    scope: tuple[str | None, str | None, str | None],
) -> Iterator[None]:
    """Run a block under a ``guard_scope()`` taken elsewhere (a thread a body starts)."""
    name, tenant, reason = scope
    tokens = (_job.set(name), _tenant.set(tenant), _crossing.set(reason))
    try:
        yield
    finally:
        _crossing.reset(tokens[2])
        _tenant.reset(tokens[1])
        _job.reset(tokens[0])
