"""``manage.py demo_seed``: an admin user and a few jobs for the demo to run."""

from __future__ import annotations

import random
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from testproject.demo.jobs import build_report, flaky, send_welcome


class Command(BaseCommand):
    help = "Create the demo admin user (admin/admin) and enqueue example jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--count", type=int, default=10, help="jobs of each kind to enqueue"
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
        self.stdout.write(f"enqueued {3 * count + 1} demo jobs")
