"""The command line of ``manage.py jobs`` (P3): one function per verb adds its
subcommand and arguments; ``add_verbs`` adds them all."""

from __future__ import annotations

from argparse import _SubParsersAction
from typing import Any

from django.core.management.base import CommandParser

from ultimate_jobs.api import deploy
from ultimate_jobs.api import reads as introspection


def add_verbs(parser: CommandParser) -> None:
    """``--database`` and every verb's subcommand."""
    parser.add_argument(
        "--database",
        help="the alias whose jobs tables to read and act on, before the verb "
        "(default: DATABASE; Q1: an alias a queue is routed to)",
    )
    verbs = parser.add_subparsers(
        dest="verb", required=True, help="what to do (each verb has its --help)"
    )
    add_list(verbs)
    add_retry(verbs)
    add_by_id(verbs)
    add_cancel(verbs)
    _json(verbs.add_parser("manifest", help="every declared job and task (J7)"))
    for verb in ("pause", "resume"):
        sub = verbs.add_parser(verb, help=f"{verb} a queue")
        sub.add_argument("queue", help="the queue's name")
        _json(sub)
    add_bulk(verbs)
    add_deploy_check(verbs)
    add_counters(verbs)
    for verb, text in (
        ("workers", "live workers"),
        ("stats", "jobs per queue and state"),
    ):
        _json(verbs.add_parser(verb, help=text))


def add_list(verbs: _SubParsersAction[Any]) -> None:
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
    pages.add_argument("--after", help="older jobs: the cursor a page answered as next")
    pages.add_argument(
        "--before", help="newer jobs: the cursor a page answered as previous"
    )
    _json(listing)


def add_retry(verbs: _SubParsersAction[Any]) -> None:
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


def add_by_id(verbs: _SubParsersAction[Any]) -> None:
    """The verbs that take one job id: show, remove, promote."""
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


def add_cancel(verbs: _SubParsersAction[Any]) -> None:
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


def add_bulk(verbs: _SubParsersAction[Any]) -> None:
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


def add_deploy_check(verbs: _SubParsersAction[Any]) -> None:
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


def add_counters(verbs: _SubParsersAction[Any]) -> None:
    counted = verbs.add_parser("counters", help="per-job counts since a time (P5)")
    counted.add_argument("--since", default="1h", help="a duration: 1h, 1d, 7d")
    counted.add_argument("--name", help="one job's name (default: every job)")
    _json(counted)


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
