"""The answers of ``manage.py jobs`` (P3): one function per verb, each answering the
stable ``--json`` document of docs/operations.md (the MCP tools answer it too, P9).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from datetime import datetime, time
from typing import Any

from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import is_aware, make_aware

from ultimate_jobs import api
from ultimate_jobs.api import deploy
from ultimate_jobs.api import reads as introspection
from ultimate_jobs.api.overview import declared_queues
from ultimate_jobs.conf import on_alias
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.observability import counters

Warn = Callable[[str], None]  # where a verb writes a warning (the command's stderr)


def answer(verb: str, options: dict[str, Any], warn: Warn) -> Any:
    """The ``--json`` document of one verb, on ``--database`` when given (Q1)."""
    do = VERBS[verb]
    if options.get("database"):
        with on_alias(options["database"]):
            return do(options, warn)
    return do(options, warn)


def do_list(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
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


def do_show(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    # A read may name a job by the start of its id (8+ hex digits, one job).
    return api.get(introspection.resolve_id(options["id"]))


def do_retry(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    who = actor_of(options)
    if options["id"] is None:
        return _retry_many(options, who)
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


def _retry_many(options: dict[str, Any], who: api.Operator) -> dict[str, Any]:
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


def do_cancel(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    who = actor_of(options)
    if options["key"] is None:
        if options["id"] is None:
            raise InvalidArgument("id", None, "give a job id, or --name and --key")
        api.cancel(options["id"], options["reason"], actor=who)
        return {"id": options["id"], "state": "cancelled", "actor": who.as_dict()}
    if options["id"] is not None or options["name"] is None:
        raise InvalidArgument("key", options["key"], "--key takes --name and no job id")
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


def do_manifest(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    return api.manifest()


def do_remove(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    who = actor_of(options)
    api.remove(options["id"], actor=who)
    return {"id": options["id"], "removed": True, "actor": who.as_dict()}


def do_promote(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    who = actor_of(options)
    api.promote(options["id"], actor=who)
    return {"id": options["id"], "state": "ready", "actor": who.as_dict()}


def do_pause(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    queue = options["queue"]
    if queue not in declared_queues():
        warn(
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


def do_resume(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    was_paused = api.resume_queue(options["queue"])
    return {"queue": options["queue"], "paused": False, "was_paused": was_paused}


def do_bulk(options: dict[str, Any], warn: Warn) -> dict[str, int]:
    return api.bulk(
        options["action"],
        state=options["state"],
        queue=options["queue"],
        name=options["name"],
        tenant_id=options["tenant"],
        reason=options["reason"],
        actor=actor_of(options),
    )


def do_deploy_check(options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    return deploy.deploy_check(sample=options["sample"])


def do_counters(options: dict[str, Any], warn: Warn) -> list[dict[str, Any]]:
    return counters.totals(since=options["since"], name=options["name"])


def do_workers(options: dict[str, Any], warn: Warn) -> list[dict[str, Any]]:
    return introspection.workers()


def do_stats(options: dict[str, Any], warn: Warn) -> list[dict[str, Any]]:
    return introspection.queue_stats()


VERBS: dict[str, Callable[[dict[str, Any], Warn], Any]] = {
    "list": do_list,
    "show": do_show,
    "retry": do_retry,
    "cancel": do_cancel,
    "manifest": do_manifest,
    "remove": do_remove,
    "promote": do_promote,
    "pause": do_pause,
    "resume": do_resume,
    "bulk": do_bulk,
    "deploy-check": do_deploy_check,
    "counters": do_counters,
    "workers": do_workers,
    "stats": do_stats,
}


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
