"""Example jobs of the demo: a sync job, an async job, and one that fails and retries."""

from __future__ import annotations

import asyncio
import random

from ultimate_jobs import NO_TENANT, Retry, Run, Terminal, job


@job(
    idempotency_key=lambda p: f"welcome:{p['user_id']}",
    tenant=lambda p: p["org_id"],
    description="Sends the welcome email to a new user.",
)
def send_welcome(run: Run, user_id: int, org_id: str) -> None:
    run.logger.info("demo.welcome.sent", extra={"user_id": user_id})


@job(
    idempotency_key=lambda p: f"report:{p['report_id']}",
    tenant=NO_TENANT,
    description="Builds a report asynchronously.",
)
async def build_report(run: Run, report_id: int, rows: int = 1000) -> dict[str, int]:
    await asyncio.sleep(0.05)
    return {"report_id": report_id, "rows": rows}


@job(
    idempotency_key=lambda p: f"flaky:{p['n']}",
    tenant=NO_TENANT,
    retry=Retry(attempts=4, backoff="exponential", delay="1s", max_delay="10s"),
    description="Fails now and then, to show retries and dead letters.",
)
def flaky(run: Run, n: int, fail_rate: float = 0.5) -> None:
    if n < 0:
        raise Terminal("a negative n never works")
    if random.random() < fail_rate:  # noqa: S311 - a demo, not secrecy
        raise RuntimeError(f"flaky #{n} failed on attempt {run.attempt}")
