"""``manage.py db_backfill``: dry-run, enqueue and watch backfills (F2).

A dry run unless ``--write``; ``--write`` enqueues and never runs a pass inline. The
verbs live in ultimate_jobs.backfill_runs; this module parses and prints. Exit status
1 when ``--pending`` finds a pending or failed backfill, when ``--wait`` sees a pass
fail, and when ``--all --write`` could not start one of them; a dry run exits 0.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs.backfills import ledger as backfill_ledger
from ultimate_jobs.backfills import runs as backfill_runs
from ultimate_jobs.backfills.runs import Outcome, Plan, Progress
from ultimate_jobs.backfills.sweep import registered_backfills
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.models.backfills import BackfillStatus

BAR = 30


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= backfill_ledger.MAX_LIST:
        raise argparse.ArgumentTypeError(
            f"--limit={text!r}: a whole number from 1 to {backfill_ledger.MAX_LIST}"
        )
    return value


class Command(BaseCommand):
    help = "Dry-run (default), enqueue (--write) and watch (--wait) backfills."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", nargs="?", help="a declared backfill")
        for flag, text in (
            ("--write", "enqueue the pass (without it: a dry run)"),
            ("--force", "sweep a completed backfill again, into a new ledger row"),
            ("--all", "every declared backfill, each on its own"),
            ("--pending", "exit 1 while any backfill is pending or failed"),
            ("--list", "the ledger, newest first"),
            ("--wait", "with --write: block until the pass ends"),
            ("--json", "machine-readable output"),
        ):
            parser.add_argument(flag, action="store_true", help=text)
        parser.add_argument(
            "--status",
            choices=BackfillStatus.values,
            help="--list: passes in this status only",
        )
        parser.add_argument(
            "--limit", type=_limit, default=50, help="--list: at most N passes"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.json = options["json"]
        name = options["name"]
        if options["wait"] and not options["write"]:
            raise CommandError("--wait waits for what --write enqueues: add --write")
        if name and options["all"]:
            raise CommandError("name one backfill or use --all, not both")
        try:
            if options["list"]:
                self._list(name, options["status"], options["limit"])
                return
            if options["pending"] or not (name or options["all"]):
                self._states(exit_when_pending=options["pending"])
                return
            if options["all"] and not registered_backfills():
                self._emit([], self._outcome_line)
                self._say_when_none_declared()
                return
            if options["all"]:  # each name isolated: a refusal is a line, not the end
                outcomes = backfill_runs.each(
                    [b.name for b in registered_backfills()],
                    write=options["write"],
                    force=options["force"],
                )
            elif options["write"]:
                started = backfill_runs.start(name, force=options["force"])
                outcomes = [Outcome(name, started=started)]
            else:
                planned = backfill_runs.plan(name, force=options["force"])
                outcomes = [Outcome(name, planned=planned)]
        except JobsError as exc:
            if self.json:
                error = {"code": exc.code, "message": exc.message}
                self.stdout.write(json.dumps({"error": error}))
            raise CommandError(str(exc)) from exc
        items = [o.as_json() for o in outcomes]
        if not self.json:
            self._emit(items, self._outcome_line)
        failed = any(o.failed for o in outcomes)
        for item, outcome in zip(items, outcomes, strict=True):
            run = outcome.started
            if options["wait"] and run is not None and run.job_id is not None:
                seen = self._wait(run.job_id, run.plan)
                item["final_state"] = seen.state
                failed = failed or not seen.succeeded
        if self.json:
            self._emit(items, self._outcome_line)
        if failed:
            raise SystemExit(1)

    def _states(self, *, exit_when_pending: bool) -> None:
        states = backfill_runs.backfill_states()
        self._emit([s.as_json() for s in states], self._state_line)
        self._say_when_none_declared()
        unswept = [s for s in states if s.state in backfill_runs.PENDING_STATES]
        if exit_when_pending and unswept:
            raise SystemExit(1)

    def _list(self, name: str | None, status: str | None, limit: int) -> None:
        rows = backfill_ledger.read(
            names=[name] if name else None,
            status=status,
            limit=limit,
        )
        self._emit([r.as_json() for r in rows], self._ledger_line)
        if not rows and not self._say_when_none_declared() and not self.json:
            self.stdout.write("no passes recorded")

    def _say_when_none_declared(self) -> bool:
        """Say so when no backfill is declared (not with --json: its answer is [])."""
        if registered_backfills():
            return False
        if not self.json:
            self.stdout.write("no backfills declared")
        return True

    def _wait(self, job_id: Any, planned: Plan) -> Progress:
        """Watch one pass to its end: a bar on a terminal, a line per change else
        (nothing with --json, whose answer carries the final state)."""
        tty = self.stdout.isatty() and not self.json
        shown: list[str] = []

        def report(seen: Progress) -> None:
            line = self._progress_line(planned, seen, bar=tty)
            if tty:  # over the last line, padded: a shorter line leaves no tail
                width = max([len(line), *map(len, shown[-1:])])
                self.stdout.write("\r" + line.ljust(width), ending="")
                self.stdout.flush()
            elif line not in shown[-1:] and not self.json:
                self.stdout.write(line)
            shown.append(line)

        seen = backfill_runs.watch(job_id, report=report)
        if tty:
            self.stdout.write("")
        return seen

    # -- output --------------------------------------------------------------------

    def _emit(self, items: list[dict[str, Any]], line: Any) -> None:
        if self.json:
            self.stdout.write(json.dumps(items, indent=2, sort_keys=True, default=str))
            return
        for item in items:
            self.stdout.write(line(item))

    @staticmethod
    def _outcome_line(o: dict[str, Any]) -> str:
        if "error" in o and "action" not in o:
            return f"{o['name']}: refused: {o['error']['message']}"
        if "job_id" in o:
            if o["job_id"] is None:
                return f"{o['name']}: skipped: {o['reason']}"
            verb = "joined the live pass" if o["deduped"] else "enqueued"
            return f"{o['name']}: {verb}: job {o['job_id']}"
        if o["count"] is None:
            count = "count() not declared: rows unknown"
        else:
            count = (
                f"count() = {o['count']} rows: at least {o['batches']} batch(es), "
                f"{o['seconds']}s at the declared rate"
            )
        return (
            f"{o['name']}: {o['state']}: {o['action']}: {o['reason']}\n  {count}\n"
            "  dry run: nothing was written (--write enqueues)"
        )

    @staticmethod
    def _state_line(s: dict[str, Any]) -> str:
        last = s["last"]
        seen = f" (pass #{last['id']}: {last['rows']} rows)" if last else ""
        moved = " [definition changed since]" if s["checksum_changed"] else ""
        return f"{s['state']:<9} {s['name']}{seen}{moved}"

    @staticmethod
    def _ledger_line(r: dict[str, Any]) -> str:
        error = f" error={r['error']}" if r["error"] else ""
        return (
            f"#{r['id']} {r['name']} {r['status']} rows={r['rows']} "
            f"batches={r['batches']} started={r['started_at']} "
            f"completed={r['completed_at']} app={r['app_version'] or '-'}{error}"
        )

    @staticmethod
    def _progress_line(planned: Plan, seen: Progress, *, bar: bool) -> str:
        counts = f"{seen.rows} rows, {seen.batches} batches"
        if bar and planned.count:
            filled = min(BAR, BAR * seen.rows // planned.count)
            counts = (
                f"[{'#' * filled}{'.' * (BAR - filled)}] {seen.rows}/{planned.count}"
            )
        error = f" - {seen.error}" if seen.error and seen.state != "running" else ""
        attempt = f"attempt {seen.attempt}/{seen.max_attempts}"
        return f"{planned.name}: {seen.state} ({attempt}) {counts}{error}"
