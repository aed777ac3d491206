"""The text output of ``manage.py jobs`` (P3): what each verb's answer reads as on a
terminal; ``--json`` answers the document itself (verbs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ultimate_jobs.conf import reading_aliases
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.runtime.budget import OPERATOR_RESERVE, server_room

Write = Callable[[str], Any]  # the command's stdout.write


def write_answer(write: Write, verb: str, result: Any) -> None:
    """The text (not ``--json``) form of one verb's answer."""
    if verb == "list":
        _list(write, result)
    elif verb == "manifest":
        _manifest(write, result)
    elif verb == "stats":
        for queue in result:
            states = " ".join(f"{k}={v}" for k, v in queue["states"].items() if v)
            paused = " (paused)" if queue["paused"] else ""
            write(f"{queue['queue']}{paused}: {states or 'empty'}")
    elif verb == "counters":
        for row in result:
            mean = row["mean_duration"]
            write(
                f"{row['name']}: done={row['done']} retried={row['retried']} "
                f"failed={row['failed']} dead={row['dead']} "
                f"mean={'-' if mean is None else f'{mean:.3f}s'}"
            )
    elif verb == "workers":
        for worker in result:
            write(
                f"{worker['id']}  queues={','.join(worker['queues'])} slots={worker['slots']} "
                f"in_flight={len(worker['in_flight'])} heartbeat={worker['heartbeat_at']}"
            )
        _fleet(write)
    elif verb == "show":
        _show(write, result)
    elif verb == "deploy-check":
        for problem in result["problems"]:
            write(f"{problem['code']}: {problem['message']}")
        if result["ok"]:
            write(f"deploy-check: no problem on {', '.join(result['aliases'])}")
    elif verb == "retry" and "affected" in result:
        moved = result["affected"]
        write(
            f"retried {moved} job{'s' if moved != 1 else ''}; "
            f"{result['remaining']} remaining"
            + (" (run it again to go on)" if result["remaining"] else "")
        )
    else:
        write(" ".join(f"{k}={v}" for k, v in result.items()))


def _fleet(write: Write) -> None:
    """The fleet's connections on each alias against its budget (issue 31)."""
    for alias in reading_aliases():
        try:
            room = server_room(alias)
        except JobsError:
            continue
        purposes = " ".join(f"{k}={v}" for k, v in sorted(room.ours.items()))
        write(
            f"connections on {alias}: fleet={room.fleet} ({purposes or 'none'}) "
            f"open={room.sessions} max_connections={room.max_connections} "
            f"usable={room.usable} (superuser {room.superuser_reserved}, "
            f"operators {OPERATOR_RESERVE})"
        )


def _manifest(write: Write, result: dict[str, Any]) -> None:
    for row in result["jobs"]:
        retry = row["retry"]
        write(
            f"job  {row['name']}  queue={row['queue']} "
            f"attempts={retry['attempts']} ({retry['backoff']}) "
            f"timeout={row['timeout']} concurrency={row['concurrency']}"
        )
    for row in result["tasks"]:
        fires = ",".join(row["fires"]) if row["fires"] is not None else "?"
        write(
            f"task {row['name']}  cron={row['cron']!r} tz={row['tz']} "
            f"catch_up={row['catch_up']} next={row['next_run']} fires={fires}"
        )


def _list(write: Write, result: dict[str, Any]) -> None:
    for job in result["jobs"]:
        fill = job["backfill"]
        mark = (
            f"  [backfill pass {fill['pass']} {fill['status']}: "
            f"{fill['batches']} batches, {fill['rows']} rows]"
            if fill and fill["in_flight"]
            else ""
        )
        write(
            f"{job['id']}  {job['state']:<9} {job['attempt']}/{job['max_attempts']}  "
            f"{job['queue']:<12} {job['name']}{mark}"
        )
    for row in result.get("unreadable", []):
        write(f"{row['id']}  UNREADABLE  {row['error']}")
    if result["previous"]:
        write(f"previous page: --before {result['previous']}")
    if result["next"]:
        write(f"next page: --after {result['next']}")


def _show(write: Write, result: dict[str, Any]) -> None:
    for key, value in result.items():
        if key not in ("logs", "attempts"):
            write(f"{key}: {value}")
    for attempt in result.get("attempts", []):
        error = (attempt["error"] or "").partition("\n")[0]
        write(
            f"attempt {attempt['attempt']}  {attempt['outcome']:<13} "
            f"{attempt['worker_id'] or '-'}  {attempt['started_at'] or '-'} .. "
            f"{attempt['finished_at'] or '-'}  {error}"
        )
    for group in result["logs"]:
        dropped = f", {group['dropped']} older not kept" if group["dropped"] else ""
        write(f"logs of attempt {group['attempt']}{dropped}:")
        for line in group["entries"]:
            write(f"  {line['at']} {line['level']:<7} {line['message']}")
