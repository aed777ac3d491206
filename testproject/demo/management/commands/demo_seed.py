"""``manage.py demo_seed``: an admin user and one of each kind of work for the demo.

Plain jobs that succeed, retry and die; a job waiting in a paused queue; a job with steps and a sleep; a runtime schedule
(``recur``) beside the cron task the code declares; users with mixed-case emails and a
pass of the backfill that lower-cases them; a webhook to the demo's own receiver. So
every admin page has rows once the worker has run for a few seconds.
"""

from __future__ import annotations

import random
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from testproject.demo.jobs import (
    archive_report,
    build_report,
    flaky,
    notify_receiver,
    onboard_org,
    send_welcome,
)
from ultimate_jobs import api, recur
from ultimate_jobs.agents import tokens
from ultimate_jobs.models import AgentToken


class Command(BaseCommand):
    help = "Create the demo admin user (admin/admin) and enqueue example work."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--count", type=int, default=10, help="jobs of each plain kind to enqueue"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        if not users.objects.filter(username="admin").exists():
            users.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("created the admin user (admin / admin)")
        base = random.randint(1, 1_000_000)  # noqa: S311 - demo ids
        count = options["count"]
        send_welcome.enqueue_many(
            [{"user_id": base + i, "org_id": f"org-{i % 3}"} for i in range(count)]
        )
        build_report.enqueue_many([{"report_id": base + i} for i in range(count)])
        flaky.enqueue_many([{"n": base + i} for i in range(count)])
        flaky.enqueue(
            n=-1
        )  # dead-letters at once: see it under state=dead in the admin
        self.stdout.write(f"enqueued {3 * count + 1} plain jobs")

        api.pause_queue("archive", by="demo_seed")
        archive_report.enqueue(report_id=base)
        self.stdout.write(
            "paused the queue 'archive' with a job waiting in it "
            "(resume: manage.py jobs resume archive)"
        )

        onboard_org.enqueue(org_id=f"org-{base}")
        self.stdout.write("enqueued demo.onboard_org: two steps, a 30 s sleep, a step")

        recur(
            build_report,
            {"report_id": 0, "rows": 5},
            cron="*/5 * * * *",
            tz="Europe/Paris",
            schedule_key="demo.report-every-5-minutes",
        )
        self.stdout.write(
            "scheduled demo.report-every-5-minutes (recur), beside the cron task "
            "demo.minute_report"
        )

        for i in range(12):
            users.objects.get_or_create(
                username=f"demo-user-{i}",
                defaults={"email": f"Demo.User.{i}@Example.COM"},
            )
        call_command(
            "db_backfill", "demo.lowercase_emails", "--write", stdout=self.stdout
        )

        notify_receiver.enqueue(endpoint_id="demo-receiver", event_id=f"evt_{base}")
        self.stdout.write(
            "enqueued demo.notify_receiver: a signed POST to /demo/webhook"
        )

        admin = users.objects.get(username="admin")
        if not AgentToken.objects.filter(name="demo agent").exists():
            tokens.issue(admin, "demo agent", by="demo_seed")
            self.stdout.write(
                "issued the agent token 'demo agent' (docs/agents.md; revoke it "
                "in the admin)"
            )
