"""``manage.py jobs``: the operator verbs of the admin on the command line (P3).

``--json`` output is stable and documented in docs/operations.md. Each verb's
arguments are in management/verb_args.py, its answer in management/verbs.py and its
text output in management/verb_text.py.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.management import verb_args, verb_text, verbs


class Command(BaseCommand):
    help = "Inspect and operate jobs: list, show, retry, cancel, remove, promote, bulk, pause, resume, workers, stats, counters, manifest, deploy-check."

    def add_arguments(self, parser: CommandParser) -> None:
        verb_args.add_verbs(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        try:
            result = self.answer(verb, options)
        except JobsError as exc:
            if options.get("json"):
                self.stdout.write(
                    json.dumps({"error": {"code": exc.code, "message": exc.message}})
                )
            raise CommandError(str(exc)) from exc
        if options.get("json"):
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True, default=str))
        else:
            verb_text.write_answer(self.stdout.write, verb, result)
        if verb == "deploy-check" and not result["ok"]:
            raise CommandError(
                f"deploy-check: {len(result['problems'])} problem(s), listed above"
            )

    def answer(self, verb: str, options: dict[str, Any]) -> Any:
        """The ``--json`` document of one verb (the MCP tools answer it too, P9)."""
        return verbs.answer(verb, options, self.stderr.write)
