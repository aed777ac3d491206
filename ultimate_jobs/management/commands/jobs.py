"""``manage.py jobs``: the operator verbs of the admin on the command line (P3).

``--json`` output is stable and documented in docs/operations.md.
"""

from __future__ import annotations

import getpass
import json
from datetime import datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import is_aware, make_aware

from ultimate_jobs import api
from ultimate_jobs.api import deploy
from ultimate_jobs.api import reads as introspection
from ultimate_jobs.api.overview import declared_queues
from ultimate_jobs.conf import on_alias, reading_aliases
from ultimate_jobs.ground.exceptions import InvalidArgument, JobsError
from ultimate_jobs.observability import counters
from ultimate_jobs.runtime.budget import OPERATOR_RESERVE, server_room


def instant(value: str | None, field: str) -> datetime | None:
    """An ISO 8601 time or date from the command line, aware (naive: TIME_ZONE)."""
    if value is None:
        return None
    try:
        moment = parse_datetime(value)
        if moment is None and (day := parse_date(value)) is not None:
            moment = datetime.combine(day, time.min)
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidArgument(
            field,
            value,
            "an ISO 8601 time or date, e.g. 2026-05-01T09:00 or 2026-05-01",
        )
    return moment if is_aware(moment) else make_aware(moment)


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
    """The operator of a command-line verb: ``--actor``, else the OS user (P2); an
    ``operator`` a caller put in the options (the MCP tools, P9) is taken as it is."""
    given = options.get("operator")
    if isinstance(given, api.Operator):
        return given
    name = options.get("actor") or os_user()
    return api.operator_of(api.Operator(name, name, "cli"))


class Command(BaseCommand):
    help = "Inspect and operate jobs: list, show, retry, cancel, remove, promote, bulk, pause, resume, workers, stats, counters, manifest, deploy-check."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            help="the alias whose jobs tables to read and act on, before the verb "
            "(default: DATABASE; Q1: an alias a queue is routed to)",
        )
        verbs = parser.add_subparsers(
            dest="verb", required=True, help="what to do (each verb has its --help)"
        )
        listing = verbs.add_parser("list", help="one page of jobs, newest first")
        _filters(listing)
        listing.add_argument("--key", help="jobs holding this idempotency key")
        listing.add_argument("--parent", help="the children of this job id (S11)")
        listing.add_argument(
            "--fingerprint",
            help="jobs whose last failed attempt has this fingerprint (P10, jobs show)",
        )
        listing.add_argument(
            "--id-prefix", help="ids starting with these hex digits (4 or more)"
        )
        listing.add_argument(
            "--created-from",
            help="created at or after this ISO 8601 time or date (naive: TIME_ZONE)",
        )
        listing.add_argument(
            "--created-to",
            help="created before this ISO 8601 time or date (naive: TIME_ZONE)",
        )
        listing.add_argument(
            "--limit",
            type=int,
            default=introspection.DEFAULT_PAGE,
            help=f"jobs per page (default {introspection.DEFAULT_PAGE}, at most 200)",
        )
        pages = listing.add_mutually_exclusive_group()
        pages.add_argument(
            "--after", help="older jobs: the cursor a page answered as next"
        )
        pages.add_argument(
            "--before", help="newer jobs: the cursor a page answered as previous"
        )
        _json(listing)
        retrying = verbs.add_parser(
            "retry",
            help="requeue a finished job, or up to 1,000 of a queue's (--queue --state)",
        )
        retrying.add_argument(
            "id", nargs="?", help="the job's id (a UUID); or give --queue and --state"
        )
        retrying.add_argument(
            "--from-step",
            help="drop this step and every later one first, so they run again (one id)",
        )
        retrying.add_argument(
            "--queue",
            help="retry this queue's jobs in --state, at most 1,000 a call; call again "
            "while 'remaining' is above 0",
        )
        retrying.add_argument(
            "--state",
            choices=["dead", "failed", "cancelled", "done"],
            help="with --queue: the finished state to retry (usually dead)",
        )
        retrying.add_argument("--name", help="with --queue: only jobs of this name")
        retrying.add_argument("--tenant", help="with --queue: only jobs of this tenant")
        _json(retrying)
        add_actor_argument(retrying)
        for verb, text in (
            (
                "show",
                "one job with its steps, attempts, logs and backfill pass (the id, or "
                "its first 8+ hex digits when one job's id begins so)",
            ),
            ("remove", "delete a job that is not running"),
            ("promote", "make a delayed job due now"),
        ):
            sub = verbs.add_parser(verb, help=text)
            sub.add_argument("id", help="the job's id (a UUID)")
            _json(sub)
            if verb != "show":
                add_actor_argument(sub)
        cancel = verbs.add_parser(
            "cancel", help="cancel a live job, by id or by --name and --key"
        )
        cancel.add_argument("id", nargs="?", help="the job's id (a UUID)")
        cancel.add_argument(
            "--key", help="cancel the live job holding this idempotency key"
        )
        cancel.add_argument("--name", help="the job's name (with --key)")
        cancel.add_argument(
            "--tenant", help="the tenant holding the key (with --key; default: any)"
        )
        _reason(cancel)
        _json(cancel)
        add_actor_argument(cancel)
        _json(verbs.add_parser("manifest", help="every declared job and task (J7)"))
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
        check = verbs.add_parser(
            "deploy-check",
            help="what this code declares against the live rows and stored schedules "
            "of every alias; exits 1 naming each problem (P11)",
        )
        check.add_argument(
            "--sample",
            type=int,
            default=deploy.DEFAULT_SAMPLE,
            help="stored inputs decoded per job name and alias "
            f"(default {deploy.DEFAULT_SAMPLE})",
        )
        _json(check)
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
            self._print(verb, result)
        if verb == "deploy-check" and not result["ok"]:
            raise CommandError(
                f"deploy-check: {len(result['problems'])} problem(s), listed above"
            )

    def answer(self, verb: str, options: dict[str, Any]) -> Any:
        """The ``--json`` document of one verb (the MCP tools answer it too, P9)."""
        if options.get("database"):
            with on_alias(options["database"]):
                return getattr(self, f"do_{verb.replace('-', '_')}")(options)
        return getattr(self, f"do_{verb.replace('-', '_')}")(options)

    # -- verbs -----------------------------------------------------------------------

    def do_list(self, options: dict[str, Any]) -> dict[str, Any]:
        return introspection.list_jobs(
            state=options["state"],
            queue=options["queue"],
            name=options["name"],
            tenant=options["tenant"],
            key=options["key"],
            id_prefix=options["id_prefix"],
            parent=options["parent"],
            created_from=instant(options["created_from"], "created_from"),
            created_to=instant(options["created_to"], "created_to"),
            fingerprint=options["fingerprint"],
            limit=options["limit"],
            after=options["after"],
            before=options["before"],
        )

    def do_show(self, options: dict[str, Any]) -> dict[str, Any]:
        # A read may name a job by the start of its id (8+ hex digits, one job).
        return api.get(introspection.resolve_id(options["id"]))

    def do_retry(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        if options["id"] is None:
            return self._retry_many(options, who)
        if options["queue"] or options["state"]:
            raise InvalidArgument(
                "id", options["id"], "give a job id, or --queue and --state, not both"
            )
        run_id = api.retry(options["id"], from_step=options["from_step"], actor=who)
        answer = {
            "id": options["id"],
            "run_id": str(run_id),
            "state": "ready",
            "actor": who.as_dict(),
        }
        if options["from_step"] is not None:
            answer["from_step"] = options["from_step"]
        return answer

    def _retry_many(self, options: dict[str, Any], who: api.Operator) -> dict[str, Any]:
        """``retry --queue Q --state dead``: one bounded call of the bulk retry (P2);
        ``remaining`` says whether to call again (the moved rows left the state)."""
        if options["queue"] is None or options["state"] is None:
            raise InvalidArgument("id", None, "give a job id, or --queue and --state")
        if options["from_step"] is not None:
            raise InvalidArgument(
                "from_step", options["from_step"], "--from-step takes one job id"
            )
        return api.bulk(
            "retry",
            state=options["state"],
            queue=options["queue"],
            name=options["name"],
            tenant_id=options["tenant"],
            actor=who,
        )

    def do_cancel(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        if options["key"] is None:
            if options["id"] is None:
                raise InvalidArgument("id", None, "give a job id, or --name and --key")
            api.cancel(options["id"], options["reason"], actor=who)
            return {"id": options["id"], "state": "cancelled", "actor": who.as_dict()}
        if options["id"] is not None or options["name"] is None:
            raise InvalidArgument(
                "key", options["key"], "--key takes --name and no job id"
            )
        tenant = {} if options["tenant"] is None else {"tenant": options["tenant"]}
        cancelled = api.cancel_by_key(
            options["name"],
            options["key"],
            reason=options["reason"],
            actor=who,
            **tenant,
        )
        return {
            "id": None if cancelled is None else str(cancelled),
            "name": options["name"],
            "key": options["key"],
            "cancelled": cancelled is not None,
            "actor": who.as_dict(),
        }

    def do_manifest(self, options: dict[str, Any]) -> dict[str, Any]:
        return api.manifest()

    def do_remove(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        api.remove(options["id"], actor=who)
        return {"id": options["id"], "removed": True, "actor": who.as_dict()}

    def do_promote(self, options: dict[str, Any]) -> dict[str, Any]:
        who = actor_of(options)
        api.promote(options["id"], actor=who)
        return {"id": options["id"], "state": "ready", "actor": who.as_dict()}

    def do_pause(self, options: dict[str, Any]) -> dict[str, Any]:
        queue = options["queue"]
        if queue not in declared_queues():
            self.stderr.write(
                f"warning: no job of this deploy declares queue {queue!r} (nor the "
                "QUEUES setting); pausing it anyway: check the name"
            )
        was_running = api.pause_queue(
            queue, by=options.get("paused_by") or "manage.py jobs"
        )
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

    def do_deploy_check(self, options: dict[str, Any]) -> dict[str, Any]:
        return deploy.deploy_check(sample=options["sample"])

    def do_counters(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return counters.totals(since=options["since"], name=options["name"])

    def do_workers(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return introspection.workers()

    def do_stats(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return introspection.queue_stats()

    # -- text output -----------------------------------------------------------------

    def _print(self, verb: str, result: Any) -> None:
        if verb == "list":
            self._print_list(result)
        elif verb == "manifest":
            self._print_manifest(result)
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
            self._print_fleet()
        elif verb == "show":
            self._print_show(result)
        elif verb == "deploy-check":
            for problem in result["problems"]:
                self.stdout.write(f"{problem['code']}: {problem['message']}")
            if result["ok"]:
                self.stdout.write(
                    f"deploy-check: no problem on {', '.join(result['aliases'])}"
                )
        elif verb == "retry" and "affected" in result:
            moved = result["affected"]
            self.stdout.write(
                f"retried {moved} job{'s' if moved != 1 else ''}; "
                f"{result['remaining']} remaining"
                + (" (run it again to go on)" if result["remaining"] else "")
            )
        else:
            self.stdout.write(" ".join(f"{k}={v}" for k, v in result.items()))

    def _print_fleet(self) -> None:
        """The fleet's connections on each alias against its budget (issue 31)."""
        for alias in reading_aliases():
            try:
                room = server_room(alias)
            except JobsError:
                continue
            purposes = " ".join(f"{k}={v}" for k, v in sorted(room.ours.items()))
            self.stdout.write(
                f"connections on {alias}: fleet={room.fleet} ({purposes or 'none'}) "
                f"open={room.sessions} max_connections={room.max_connections} "
                f"usable={room.usable} (superuser {room.superuser_reserved}, "
                f"operators {OPERATOR_RESERVE})"
            )

    def _print_manifest(self, result: dict[str, Any]) -> None:
        for row in result["jobs"]:
            retry = row["retry"]
            self.stdout.write(
                f"job  {row['name']}  queue={row['queue']} "
                f"attempts={retry['attempts']} ({retry['backoff']}) "
                f"timeout={row['timeout']} concurrency={row['concurrency']}"
            )
        for row in result["tasks"]:
            fires = ",".join(row["fires"]) if row["fires"] is not None else "?"
            self.stdout.write(
                f"task {row['name']}  cron={row['cron']!r} tz={row['tz']} "
                f"catch_up={row['catch_up']} next={row['next_run']} fires={fires}"
            )

    def _print_list(self, result: dict[str, Any]) -> None:
        for job in result["jobs"]:
            fill = job["backfill"]
            mark = (
                f"  [backfill pass {fill['pass']} {fill['status']}: "
                f"{fill['batches']} batches, {fill['rows']} rows]"
                if fill and fill["in_flight"]
                else ""
            )
            self.stdout.write(
                f"{job['id']}  {job['state']:<9} {job['attempt']}/{job['max_attempts']}  "
                f"{job['queue']:<12} {job['name']}{mark}"
            )
        for row in result.get("unreadable", []):
            self.stdout.write(f"{row['id']}  UNREADABLE  {row['error']}")
        if result["previous"]:
            self.stdout.write(f"previous page: --before {result['previous']}")
        if result["next"]:
            self.stdout.write(f"next page: --after {result['next']}")

    def _print_show(self, result: dict[str, Any]) -> None:
        for key, value in result.items():
            if key not in ("logs", "attempts"):
                self.stdout.write(f"{key}: {value}")
        for attempt in result.get("attempts", []):
            error = (attempt["error"] or "").partition("\n")[0]
            self.stdout.write(
                f"attempt {attempt['attempt']}  {attempt['outcome']:<13} "
                f"{attempt['worker_id'] or '-'}  {attempt['started_at'] or '-'} .. "
                f"{attempt['finished_at'] or '-'}  {error}"
            )
        for group in result["logs"]:
            dropped = f", {group['dropped']} older not kept" if group["dropped"] else ""
            self.stdout.write(f"logs of attempt {group['attempt']}{dropped}:")
            for line in group["entries"]:
                self.stdout.write(
                    f"  {line['at']} {line['level']:<7} {line['message']}"
                )
