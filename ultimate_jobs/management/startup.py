"""The connection budget at a command's start, one path for ``jobs_worker``,
``jobs_relay`` and ``jobs_scheduler`` (issue 31): a process that would take the
connections ``max_connections`` leaves operators does not start (``X_CONNECTION_BUDGET``,
naming the numbers) unless ``--force`` (runtime/budget.py, docs/operations.md)."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.runtime.budget import refuse_over_budget

FORCE_HELP = "start this process past the connection budget (docs/operations.md)"


def add_force_argument(parser: CommandParser, help_text: str = FORCE_HELP) -> None:
    parser.add_argument("--force", action="store_true", help=help_text)


def start_within_budget(
    settings: JobsSettings,
    roles: Sequence[str],
    concurrency: int | None = None,
    *,
    force: bool,
    processes: int = 1,
) -> None:
    """Raise ``CommandError`` (``X_CONNECTION_BUDGET``) when the process running
    ``roles`` would cross the budget on DATABASE and ``force`` is not given; a
    ``--processes`` supervisor asks for its ``processes`` together, before it forks:
    children started at the same instant each read the same server state, so only
    the supervisor's sum can refuse the fleet they make.

    Then close the Django sessions the start's checks opened (ensure_postgresql, the
    migration state): the process does not keep them, and a session kept idle for
    the process's life is one the budget does not count (measured: one per relay,
    scheduler and worker, 5 of the 14 a chaos fleet had at max_connections = 20)."""
    try:
        refuse_over_budget(
            settings, roles, concurrency, force=force, processes=processes
        )
    except JobsError as exc:
        raise CommandError(str(exc)) from exc
    connections.close_all()
