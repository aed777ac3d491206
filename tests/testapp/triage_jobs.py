"""Jobs that fail from two causes, with varying messages (P10 triage tests)."""

from __future__ import annotations

from typing import Any

from ultimate_jobs import NO_TENANT, Retry, Run, job


def by_key(p: dict[str, Any]) -> str:
    return str(p["key"])


def _lookup(order: int) -> None:
    raise LookupError(f"order {order} not found in shard 0x{order:x}")


def _charge(order: int) -> None:
    raise ConnectionError(f"payment gateway 'pg-{order % 3}' timed out after {order}ms")


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def settle_order(run: Run, key: str, order: int, cause: str) -> None:
    """Fails by ``cause``: "missing" (a lookup) or "gateway" (a timeout)."""
    (_lookup if cause == "missing" else _charge)(order)


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=5, delay="1h", jitter=False),
)
def settle_order_retrying(run: Run, key: str, order: int, cause: str) -> None:
    """The same failures, retried an hour later (live while they wait)."""
    (_lookup if cause == "missing" else _charge)(order)
