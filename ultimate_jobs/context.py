"""Context variables a job body and an enqueue site read: the tenant and correlation id."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_tenant: ContextVar[str | None] = ContextVar("ultimate_jobs_tenant", default=None)
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


def current_correlation_id() -> str:
    """The correlation id an enqueue made here would record ('' when none is set)."""
    return _correlation.get()


@contextlib.contextmanager
def correlation_scope(correlation_id: str) -> Iterator[None]:
    """Record ``correlation_id`` on every job enqueued inside the block (M2)."""
    token = _correlation.set(correlation_id)
    try:
        yield
    finally:
        _correlation.reset(token)
