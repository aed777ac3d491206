"""``manage.py demo_run``: what ``scripts/demo`` runs once the venv is ready.

Migrates, seeds, serves the admin and runs a worker until Ctrl-C; testproject/demo/runner.py
says how it supervises them and stops.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from testproject.demo.runner import Demo


class Command(BaseCommand):
    help = "Run the demo: migrate, seed, serve the admin and run a worker until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--port",
            type=int,
            default=int(os.environ.get("DEMO_PORT") or 8000),
            help="the admin's port on 127.0.0.1 (default: $DEMO_PORT, else 8000)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = os.environ.get("UJ_DEMO_STARTED")  # set by scripts/demo
        demo = Demo(options["port"], started=float(started) if started else None)
        raise SystemExit(demo.run())
