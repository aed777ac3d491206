"""``manage.py jobs_worker``: run a worker and the other roles of one process (W1)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import ensure_postgresql
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.enqueue.queues import check_declared
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import InvalidArgument, JobsError
from ultimate_jobs.limits.budgets import add_limit_arguments, limits_from_options
from ultimate_jobs.management.roles import DEFAULT_ROLES, ROLES, serve
from ultimate_jobs.management.sizes import (
    MAX_CONCURRENCY,
    MAX_JOBS,
    MAX_PROCESSES,
    PROCESSES_PER_CPU,
    check_count,
    check_processes,
)
from ultimate_jobs.management.startup import start_within_budget
from ultimate_jobs.management.supervisor import supervise, watch_supervisor
from ultimate_jobs.models.migration_state import refuse_unmigrated
from ultimate_jobs.observability.logs import configure_default_logging
from ultimate_jobs.runtime.worker import MAX_WORKER_ID


class Command(BaseCommand):
    help = (
        "Run a jobs worker (and other roles): claim and run jobs until SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            help="comma-separated queues (default: QUEUES, or every declared queue)",
        )
        parser.add_argument(
            "--allow-unknown-queues",
            action="store_true",
            help="serve --queues that no job and no QUEUES entry declares "
            "(default: refuse them, naming the closest declared queue)",
        )
        parser.add_argument(
            "--concurrency", type=int, help="handler threads (default: CONCURRENCY)"
        )
        parser.add_argument(
            "--prefetch",
            type=int,
            help="rows a busy claim takes beyond the free slots, 0 for none "
            f"(default: PREFETCH; at most {MAX_CONCURRENCY})",
        )
        parser.add_argument(
            "--roles",
            default=",".join(DEFAULT_ROLES),
            help=f"comma-separated roles to run in this process (known: {', '.join(ROLES)})",
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="supervise this many worker processes (at most "
            f"{PROCESSES_PER_CPU} per CPU unless --force, never more than {MAX_PROCESSES})",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help=f"allow --processes past {PROCESSES_PER_CPU} per CPU, and start a "
            "process past the connection budget (docs/operations.md)",
        )
        parser.add_argument(
            "--metrics-port", type=int, help="serve Prometheus metrics on this port"
        )
        parser.add_argument(
            "--worker-id",
            help="the id in the worker registry (default: host:pid:random)",
        )
        parser.add_argument(
            "--max-jobs", type=int, help="drain and exit after this many jobs"
        )
        add_limit_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        configure_default_logging(options["verbosity"])
        settings = get_settings()
        try:
            _check_sizes(options)
            ensure_postgresql(settings.DATABASE)
            refuse_unmigrated(settings.aliases)
            queues = (
                [
                    validate_queue(q.strip(), field="--queues")
                    for q in options["queues"].split(",")
                ]
                if options["queues"]
                else None
            )
            if queues and not options["allow_unknown_queues"]:
                for queue in queues:
                    check_declared(queue, settings, field="--queues")
            limits = limits_from_options(options)
            if options["worker_id"] is not None:
                check_text(
                    options["worker_id"],
                    field="--worker-id",
                    max_length=MAX_WORKER_ID,
                    empty=False,
                )
        except JobsError as exc:
            raise CommandError(str(exc)) from exc
        names = [r.strip() for r in options["roles"].split(",") if r.strip()]
        if unknown := [r for r in names if r not in ROLES]:
            refused = InvalidArgument(
                "--roles",
                options["roles"],
                f"unknown role {unknown[0]!r} (known: {', '.join(ROLES)})",
            )
            raise CommandError(str(refused))
        if options["metrics_port"] is not None:
            # Imported here: a worker that serves no metrics never loads
            # prometheus_client (metrics.py, N2's RSS).
            from ultimate_jobs.observability.exposition import serve_worker_metrics

            try:
                serve_worker_metrics(
                    options["metrics_port"], supervisor=options["processes"] > 1
                )
            except JobsError as exc:
                raise CommandError(str(exc)) from exc
        if options["processes"] > 1:
            # issue 31: the fleet's sum, before any child starts (each child checks
            # again as it starts)
            start_within_budget(
                settings,
                names,
                options["concurrency"],
                force=options["force"],
                processes=options["processes"],
            )
            raise SystemExit(supervise(options["processes"]))
        watch_supervisor()  # a child of --processes dies with its supervisor
        # issue 31: a process past the connection budget does not start
        start_within_budget(
            settings, names, options["concurrency"], force=options["force"]
        )
        raise SystemExit(
            serve(
                names,
                settings,
                queues=queues,
                concurrency=options["concurrency"],
                worker_id=options["worker_id"],
                max_jobs=options["max_jobs"],
                extra={"limits": limits, "prefetch": options["prefetch"]},
            )
        )


def _check_sizes(options: dict[str, Any]) -> None:
    """Every count flag within its bounds (management/sizes.py), before anything starts."""
    check_processes(options["processes"], force=options["force"])
    if options["concurrency"] is not None:
        check_count("--concurrency", options["concurrency"], high=MAX_CONCURRENCY)
    if options["prefetch"] is not None:
        check_count("--prefetch", options["prefetch"], high=MAX_CONCURRENCY, low=0)
    if options["max_jobs"] is not None:
        check_count("--max-jobs", options["max_jobs"], high=MAX_JOBS)
