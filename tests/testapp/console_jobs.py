"""Jobs the operator console tests run (issue 15): a stored result (P8), steps with
outputs to retry from (P2), a body to cancel while it runs."""

from __future__ import annotations

from typing import Any

from ultimate_jobs import NO_TENANT, Retry, Run, job


def by_key(p: dict[str, object]) -> str:
    return str(p["key"])


@job(idempotency_key=by_key, tenant=NO_TENANT, store_result=True)
def summed(run: Run, key: str, numbers: list[int], pad: int = 0) -> dict[str, Any]:
    """Answer the sum, padded with ``pad`` characters (to pass MAX_RESULT_BYTES)."""
    return {"sum": sum(numbers), "pad": "x" * pad}


@job(idempotency_key=by_key, tenant=NO_TENANT)
def unstored(run: Run, key: str) -> int:
    return 42


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=1),
    redact=("token",),
)
def three_steps(run: Run, key: str, token: str = "", fail_at: str = "") -> None:
    """Three steps; raises after the step named ``fail_at``."""
    for name in ("fetch", "transform", "publish"):
        run.step(name, lambda name=name: {"step": name, "token": token})
        if name == fail_at:
            raise RuntimeError(f"failed after {name}")
