"""``manage.py jobs_relay``: run the outbox relay role alone (O2, W1)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import ensure_postgresql
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.management.roles import serve
from ultimate_jobs.management.sizes import MAX_BATCH_SIZE, check_count
from ultimate_jobs.management.startup import add_force_argument, start_within_budget
from ultimate_jobs.models.migration_state import refuse_unmigrated
from ultimate_jobs.observability.logs import configure_default_logging
from ultimate_jobs.runtime.relay import BATCH_SIZE
from ultimate_jobs.runtime.worker import MAX_WORKER_ID


class Command(BaseCommand):
    help = (
        "Run the outbox relay: publish jobs staged in committed transactions until "
        "SIGTERM/SIGINT (the relay role of jobs_worker, alone)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--relay-id",
            help="the relay's name in claimed_by and the logs (default: host:pid:random)",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=BATCH_SIZE,
            help=f"rows claimed and published per pass (default: {BATCH_SIZE})",
        )
        add_force_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        configure_default_logging(options["verbosity"])
        settings = get_settings()
        try:
            check_count("--batch-size", options["batch_size"], high=MAX_BATCH_SIZE)
            if options["relay_id"] is not None:
                check_text(
                    options["relay_id"],
                    field="--relay-id",
                    max_length=MAX_WORKER_ID,
                    empty=False,
                )
            ensure_postgresql(settings.DATABASE)
            refuse_unmigrated(settings.aliases)
        except JobsError as exc:
            raise CommandError(str(exc)) from exc
        start_within_budget(settings, ["relay"], force=options["force"])  # issue 31
        raise SystemExit(
            serve(
                ["relay"],
                settings,
                worker_id=options["relay_id"],
                extra={"batch_size": options["batch_size"]},
            )
        )
