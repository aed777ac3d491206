"""``manage.py jobs``: the operator verbs of the admin on the command line (P3).

``--json`` output is stable and documented in docs/operations.md.
"""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ultimate_jobs import api
from ultimate_jobs.api import reads as introspection
from ultimate_jobs.exceptions import JobsError
from ultimate_jobs.observability import counters


def _filters(parser: CommandParser, *, state_required: bool = False) -> None:
    parser.add_argument(
        "--state",
        required=state_required,
        help="jobs in this state: ready, delayed, running, suspended, done, failed, "
        "dead, cancelled",
    )
    parser.add_argument("--queue", help="jobs of this queue")
    parser.add_argument("--name", help="jobs of this name (e.g. billing.charge)")
    parser.add_argument("--tenant", help="jobs of this tenant id")


def _reason(parser: CommandParser) -> None:
    parser.add_argument(
        "--reason",
        default="cancelled from the command line",
        help="why, recorded on a cancelled job",
    )


def _json(parser: CommandParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="answer the stable JSON of docs/operations.md",
    )


def add_actor_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--actor",
        help="who is doing this, recorded with the job (default: the OS user)",
    )


def os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a bare container)
        return "unknown"


def actor_of(options: dict[str, Any]) -> api.Operator:
    """The operator of a command-line verb: ``--actor``, else the OS user (P2)."""
    name = options.get("actor") or os_user()
    return api.operator_of(api.Operator(name, name, "cli"))


class Command(BaseCommand):
    help = "Inspect and operate jobs: list, show, retry, cancel, remove, promote, bulk, pause, resume, workers, stats, counters."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(
            dest="verb", required=True, help="what to do (each verb has its --help)"
        )
        listing = verbs.add_parser("list", help="one page of jobs, newest first")
        _filters(listing)
        listing.add_argument(
            "--id-prefix", help="ids starting with these hex digits (4 or more)"
        )
        listing.add_argument(
            "--limit",
            type=int,
            default=introspection.DEFAULT_PAGE,
            help=f"jobs per page (default {introspection.DEFAULT_PAGE}, at most 200)",
        )
        listing.add_argument(
            "--after", help="the cursor a previous page answered as next"
        )
        _json(listing)
        for verb, text in (
            ("show", "one job with its steps"),
            ("retry", "requeue a finished job"),
            ("cancel", "cancel a live job"),
            ("remove", "delete a job that is not running"),
            ("promote", "make a delayed job due now"),
        ):
            sub = verbs.add_parser(verb, help=text)
            sub.add_argument("id", help="the job's id (a UUID)")
            _json(sub)
            if verb != "show":
                add_actor_argument(sub)
            if verb == "cancel":
                _reason(sub)
        for verb in ("pause", "resume"):
            sub = verbs.add_parser(verb, help=f"{verb} a queue")
            sub.add_argument("queue", help="the queue's name")
            _json(sub)
        bulk = verbs.add_parser(
            "bulk", help="retry/cancel/remove/promote up to 1,000 matching jobs"
        )
        bulk.add_argument(
            "action",
            choices=["retry", "cancel", "remove", "promote"],
            help="the verb to apply to each matching job",
        )
        _filters(bulk, state_required=True)
        _reason(bulk)
        _json(bulk)
        add_actor_argument(bulk)
        counted = verbs.add_parser("counters", help="per-job counts since a time (P5)")
        counted.add_argument("--since", default="1h", help="a duration: 1h, 1d, 7d")
        counted.add_argument("--name", help="one job's name (default: every job)")
        _json(counted)
        for verb, text in (
            ("workers", "live workers"),
            ("stats", "jobs per queue and state"),
        ):
            _json(verbs.add_parser(verb, help=text))

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        try:
            result = getattr(self, f"do_{verb}")(options)
        except JobsError as exc:
            if options.get("json"):
                self.stdout.write(
                    json.dumps({"error": {"code": exc.code, "message": exc.message}})
                )
            raise CommandError(str(exc)) from exc
        if options.get("json"):
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True, default=str))
        else:
            self._print(verb, result)

    # -- verbs -----------------------------------------------------------------------

    def do_list(self, options: dict[str, Any]) -> dict[str, Any]:
        return introspection.list_jobs(
            state=options["state"],
            queue=options["queue"],
            name=options["name"],
            tenant=options["tenant"],
            id_prefix=options["id_prefix"],
            limit=options["limit"],
            after=options["after"],
        )

    def do_show(self, options: dict[str, Any]) -> dict[str, Any]:
        return api.get(options["id"])

    def do_retry(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        run_id = api.retry(options["id"], actor=who)
        return {
            "id": options["id"],
            "run_id": str(run_id),
            "state": "ready",
            "actor": who.as_dict(),
        }

    def do_cancel(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        api.cancel(options["id"], options["reason"], actor=who)
        return {"id": options["id"], "state": "cancelled", "actor": who.as_dict()}

    def do_remove(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        api.remove(options["id"], actor=who)
        return {"id": options["id"], "removed": True, "actor": who.as_dict()}

    def do_promote(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        api.promote(options["id"], actor=who)
        return {"id": options["id"], "state": "ready", "actor": who.as_dict()}

    def do_pause(self, options: dict[str, Any]) -> dict[str, Any]:
        was_running = api.pause_queue(options["queue"], by="manage.py jobs")
        return {
            "queue": options["queue"],
            "paused": True,
            "was_paused": not was_running,
        }

    def do_resume(self, options: dict[str, Any]) -> dict[str, Any]:
        was_paused = api.resume_queue(options["queue"])
        return {"queue": options["queue"], "paused": False, "was_paused": was_paused}

    def do_bulk(self, options: dict[str, Any]) -> dict[str, int]:
        return api.bulk(
            options["action"],
            state=options["state"],
            queue=options["queue"],
            name=options["name"],
            tenant_id=options["tenant"],
            reason=options["reason"],
            actor=actor_of(options),
        )

    def do_counters(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return counters.totals(since=options["since"], name=options["name"])

    def do_workers(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return introspection.workers()

    def do_stats(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return introspection.queue_stats()

    # -- text output -----------------------------------------------------------------

    def _print(self, verb: str, result: Any) -> None:
        if verb == "list":
            for job in result["jobs"]:
                self.stdout.write(
                    f"{job['id']}  {job['state']:<9} {job['attempt']}/{job['max_attempts']}  "
                    f"{job['queue']:<12} {job['name']}"
                )
            for row in result.get("unreadable", []):
                self.stdout.write(f"{row['id']}  UNREADABLE  {row['error']}")
            if result["next"]:
                self.stdout.write(f"next page: --after {result['next']}")
        elif verb == "stats":
            for queue in result:
                states = " ".join(f"{k}={v}" for k, v in queue["states"].items() if v)
                paused = " (paused)" if queue["paused"] else ""
                self.stdout.write(f"{queue['queue']}{paused}: {states or 'empty'}")
        elif verb == "counters":
            for row in result:
                mean = row["mean_duration"]
                self.stdout.write(
                    f"{row['name']}: done={row['done']} retried={row['retried']} "
                    f"failed={row['failed']} dead={row['dead']} "
                    f"mean={'-' if mean is None else f'{mean:.3f}s'}"
                )
        elif verb == "workers":
            for worker in result:
                self.stdout.write(
                    f"{worker['id']}  queues={','.join(worker['queues'])} slots={worker['slots']} "
                    f"in_flight={len(worker['in_flight'])} heartbeat={worker['heartbeat_at']}"
                )
        elif verb == "show":
            for key, value in result.items():
                self.stdout.write(f"{key}: {value}")
        else:
            self.stdout.write(" ".join(f"{k}={v}" for k, v in result.items()))
