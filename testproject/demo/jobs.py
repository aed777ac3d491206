"""Example jobs of the demo: one of each kind, so every admin page has something to show.

A sync job, an async job, one that fails and retries, a job with durable steps and a
sleep, a cron task, a backfill over the users and a webhook delivered to the demo's own
receiver (testproject/demo/views.py). ``manage.py demo_seed`` enqueues them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F
from django.db.models.functions import Lower

from testproject.demo.views import RECEIVER_SECRET
from ultimate_jobs import (
    NO_TENANT,
    DatabaseWebhookLedger,
    Retry,
    Run,
    Terminal,
    WebhookEndpoint,
    WebhookEvent,
    backfill,
    job,
    task,
    webhook,
)


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


@job(
    idempotency_key=lambda p: f"archive:{p['report_id']}",
    tenant=NO_TENANT,
    queue="archive",
    description="Archives a report; demo_seed pauses its queue.",
)
def archive_report(run: Run, report_id: int) -> None:
    run.logger.info("demo.report.archived", extra={"report_id": report_id})


# -- durable steps: the job's page shows its step trace (S1, S3) ------------------------


@job(
    idempotency_key=lambda p: f"onboard:{p['org_id']}",
    tenant=lambda p: p["org_id"],
    description="Provisions an organisation, welcomes it, sleeps, then nudges it.",
)
def onboard_org(run: Run, org_id: str, nap: str = "30s") -> None:
    plan = run.step("provision", lambda: {"org": org_id, "plan": "pro"})
    run.step("welcome-email", lambda: f"welcomed {plan['org']}")
    run.sleep(nap)  # suspended, holding no worker: the step trace shows it waiting
    run.step("nudge", lambda: f"nudged {plan['org']}")


# -- a cron task: Task fires lists it, and it enqueues a report every minute (C1) --------


@task(cron="* * * * *", tz="UTC", description="A report every minute.")
def minute_report(occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
    return [(build_report, {"report_id": int(occurrence.timestamp()) // 60})]


# -- a backfill: lower-cases the users' emails, batch by batch (F1) ---------------------


def mixed_case_emails() -> Any:
    users = get_user_model().objects.annotate(lowered=Lower("email"))
    return users.exclude(email=F("lowered"))


def lower_emails(users: list[Any], cancel_token: Any) -> None:
    for user in users:
        user.email = user.email.lower()  # sets a value: safe to run twice
    get_user_model().objects.bulk_update(users, ["email"])


lowercase_emails = backfill(
    "demo.lowercase_emails",
    source=mixed_case_emails,
    handle=lower_emails,
    batch=5,
    rate=2,
    count=lambda: mixed_case_emails().count(),
    description="Lower-cases the users' email addresses.",
)


# -- a webhook to the demo's own receiver, /demo/webhook (F5) ---------------------------


def local_receiver(p: dict[str, Any]) -> WebhookEndpoint:
    # DEMO_PORT is the port scripts/demo serves on; the worker inherits it.
    port = os.environ.get("DEMO_PORT", "8000")
    return WebhookEndpoint(
        id=p["endpoint_id"],
        url=f"http://127.0.0.1:{port}/demo/webhook",
        secret=RECEIVER_SECRET,
    )


def ping_event(p: dict[str, Any]) -> WebhookEvent:
    return WebhookEvent(
        id=p["event_id"], topic="demo.ping", body=json.dumps({"event": p["event_id"]})
    )


notify_receiver = webhook(
    "demo.notify_receiver",
    tenant=NO_TENANT,
    endpoint=local_receiver,
    event=ping_event,
    ledger=DatabaseWebhookLedger(),
    timeout="5s",
    retry=Retry(attempts=5, backoff="exponential", delay="2s", max_delay="30s"),
    description="Delivers a signed ping to the demo's own receiver.",
)
