"""``manage.py jobs_sql``: list, show, render and EXPLAIN the named statements."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.bounds import json_problem, text_problem
from ultimate_jobs.ground.exceptions import InvalidArgument, QueryError
from ultimate_jobs.sql import QUERIES, Query

MAX_DEPTH = 64  # a -p value nested deeper is refused before it is parsed further


class Command(BaseCommand):
    help = "Show the exact SQL statements the worker runs; render or EXPLAIN them."

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument(
            "--list", action="store_true", help="every statement and its first doc line"
        )
        action.add_argument(
            "--show", metavar="NAME", help="the statement with its comment"
        )
        action.add_argument(
            "--render",
            metavar="NAME",
            help="the statement with -p parameters bound, for psql",
        )
        action.add_argument(
            "--explain", metavar="NAME", help="EXPLAIN the statement with -p parameters"
        )
        parser.add_argument(
            "-p",
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a parameter (JSON value, else text); unset ones are NULL",
        )
        parser.add_argument(
            "--analyze",
            action="store_true",
            help="with --explain: EXPLAIN ANALYZE in a rolled-back transaction",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            for entry in sorted(QUERIES.values(), key=lambda q: (q.source, q.name)):
                first = entry.doc.split(". ")[0]
                self.stdout.write(f"{entry.name:<24} {entry.source:<14} {first}")
            return
        name = options["show"] or options["render"] or options["explain"]
        found = QUERIES.get(name)
        if found is None:
            refused = InvalidArgument("NAME", name, "no such statement (see --list)")
            raise CommandError(str(refused))
        query: Query[Any] = found
        if options["show"]:
            self.stdout.write(
                f"-- name: {query.name} :{query.returns}  ({query.source})\n-- {query.doc}\n{query.text}"
            )
            return
        params = _params(query, options["param"])
        try:
            self._run(
                query, params, render=options["render"], analyze=options["analyze"]
            )
        except (DatabaseError, ValueError, TypeError) as exc:
            # The statement with these parameters failed in the driver or the server:
            # a coded line, never a traceback (issue 31).
            raise CommandError(str(QueryError(query.name, exc))) from exc

    def _run(
        self, query: Query[Any], params: dict[str, Any], *, render: bool, analyze: bool
    ) -> None:
        connection = connections[get_settings().DATABASE]
        with connection.cursor() as cursor:
            rendered = cursor.mogrify(query.text, params)
            text = rendered.decode() if isinstance(rendered, bytes) else rendered
            if render:
                self.stdout.write(text)
                return
            explain = "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "
            cursor.execute("BEGIN")
            try:
                cursor.execute(explain + text)
                for (line,) in cursor.fetchall():
                    self.stdout.write(line)
            finally:
                cursor.execute("ROLLBACK")


def _params(query: Query[Any], given: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = dict.fromkeys(query.params)
    for item in given:
        key, sep, raw = item.partition("=")
        if not sep or key not in query.params:
            refused = InvalidArgument(
                "-p", item, f"expected KEY=VALUE with KEY one of {sorted(query.params)}"
            )
            raise CommandError(str(refused))
        if (problem := text_problem(raw)) is not None:
            raise CommandError(str(InvalidArgument(f"-p {key}", raw, problem)))
        try:
            values[key] = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            values[key] = raw
        found = json_problem(values[key], max_depth=MAX_DEPTH)
        if found is not None:
            where = f"-p {key}" + (f" {found.path}" if found.path else "")
            raise CommandError(str(InvalidArgument(where, found.value, found.reason)))
    return values
