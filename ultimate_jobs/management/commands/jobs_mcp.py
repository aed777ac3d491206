"""``manage.py jobs_mcp --user NAME``: the operator verbs as MCP tools over stdio (P9).

A desktop agent starts it as its MCP server; every tool acts as the Django user NAME,
with that user's permissions, and each change is recorded with that user and ``mcp``
as the surface (docs/agents.md). Needs the ``mcp`` extra: ``ultimate-jobs[mcp]``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Serve the operator verbs as MCP tools over stdio, acting as one Django user."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--user",
            required=True,
            help="the username the agent acts as; its permissions decide what it may do",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        model = get_user_model()
        try:
            user = model._default_manager.get_by_natural_key(options["user"])
        except model.DoesNotExist:
            raise CommandError(
                f"--user={options['user']!r}: no such user (give an existing username)"
            ) from None
        if not user.is_active:
            raise CommandError(f"--user={options['user']!r}: the user is inactive")
        try:
            from ultimate_jobs.agents.server import serve_stdio
        except ImportError as exc:  # pragma: no cover - the extra is missing
            raise CommandError(
                f"the mcp package is missing ({exc}): pip install 'ultimate-jobs[mcp]'"
            ) from None
        serve_stdio(user)
