"""``manage.py jobs_scheduler``: run the scheduler role alone (W1, C3).

Run it on as many machines as you like: one process leads (a lease row) and fires the
cron tasks and runtime schedules; the others stand by and take over when the leader's
lease lapses. SIGTERM/SIGINT stops it after the round in progress and hands the lease
back, so a standby takes over at once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import ensure_postgresql
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.management.roles import serve
from ultimate_jobs.management.startup import add_force_argument, start_within_budget
from ultimate_jobs.models.migration_state import refuse_unmigrated
from ultimate_jobs.observability.logs import configure_default_logging


class Command(BaseCommand):
    help = "Run the jobs scheduler: fire cron tasks and schedules while leading."

    def add_arguments(self, parser: CommandParser) -> None:
        add_force_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        configure_default_logging(options["verbosity"])
        settings = get_settings()
        try:
            ensure_postgresql(settings.DATABASE)
            refuse_unmigrated(settings.aliases)
        except JobsError as exc:
            raise CommandError(str(exc)) from exc
        start_within_budget(settings, ["scheduler"], force=options["force"])  # issue 31
        raise SystemExit(serve(["scheduler"], settings))
