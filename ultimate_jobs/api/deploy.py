"""``jobs deploy-check`` (P11): what this code declares against what the databases hold.

Run it with the new code before (or while) it replaces the old: it reads the live rows
and the stored schedules of every alias that holds jobs tables (Q1) and names each
thing that would fail once the new code runs, so a rolling deploy stops before it
dead-letters anything (docs/operations.md, "Rolling deploys"):

* ``undeclared_job``: live rows (ready, delayed, suspended, running) of a job name this
  code does not declare: no worker of this code claims them;
* ``input_refused``: live rows whose stored input this code's signature refuses, after
  upgrading an older version (``@job(version=, upgrade=)``): their next attempt fails.
  At most ``sample`` rows of each name and alias are decoded; the problem counts them;
* ``task_disappeared``: the stored watermark of a cron task this code no longer
  declares (it will not fire again: declare it, or delete the row on purpose);
* ``schedule_job_undeclared`` / ``schedule_input_refused``: a runtime schedule naming a
  job this code does not declare, or holding an input its signature refuses;
* ``queue_unserved``: live rows in a queue no declared job (nor the QUEUES setting)
  names, so no worker started for this code's queues claims them.

Every read is bounded: grouped counts, and at most ``sample`` inputs per name.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count

from ultimate_jobs.api.overview import declared_queues
from ultimate_jobs.conf import get_settings, reading_aliases
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.redaction import cached_redaction
from ultimate_jobs.declaration.registry import Declared, Registry, registry
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.models import LIVE_STATES, Job, Schedule, TaskWatermark
from ultimate_jobs.scheduling.tasks import TaskRegistry, task_registry

DEFAULT_SAMPLE = 1000
MAX_SAMPLE = 100_000


def deploy_check(
    *,
    sample: int = DEFAULT_SAMPLE,
    jobs: Registry = registry,
    tasks: TaskRegistry = task_registry,
) -> dict[str, Any]:
    """``{"ok", "aliases", "sample", "problems"}``: ``ok`` is False when any problem
    was found; each problem has a ``code``, where it is and a ``message``."""
    validate.whole(
        sample,
        field="sample",
        most=MAX_SAMPLE,
        reason=f"a whole number of rows, from 1 to {MAX_SAMPLE}",
    )
    aliases = reading_aliases()
    problems: list[dict[str, Any]] = []
    for alias in aliases:
        problems += _rows(alias, jobs, sample)
        problems += _tasks(alias, tasks)
        problems += _schedules(alias, jobs)
    return {
        "ok": not problems,
        "aliases": list(aliases),
        "sample": sample,
        "problems": problems,
    }


def _live(alias: str) -> Any:
    return Job.objects.using(alias).filter(state__in=[str(s) for s in LIVE_STATES])


def _rows(alias: str, jobs: Registry, sample: int) -> list[dict[str, Any]]:
    counts = (
        _live(alias)
        .order_by()
        .values_list("name", "queue", "state")
        .annotate(rows=Count("id"))
    )
    by_name: dict[str, dict[str, int]] = defaultdict(dict)
    by_queue: dict[str, int] = defaultdict(int)
    for name, queue, state, rows in counts:
        by_name[name][state] = by_name[name].get(state, 0) + rows
        by_queue[queue] += rows
    found: list[dict[str, Any]] = []
    for name in sorted(by_name):
        if name not in jobs:
            rows = sum(by_name[name].values())
            found.append(
                {
                    "code": "undeclared_job",
                    "alias": alias,
                    "name": name,
                    "rows": rows,
                    "states": dict(sorted(by_name[name].items())),
                    "message": f"{rows} live row(s) of job {name!r} on {alias!r}, "
                    "which this code does not declare: no worker of it claims them",
                }
            )
        else:
            found += _inputs(alias, jobs.get(name), sample)
    serving = declared_queues() | {handle.definition.queue for handle in jobs}
    for queue in sorted(set(by_queue) - serving):
        found.append(
            {
                "code": "queue_unserved",
                "alias": alias,
                "queue": queue,
                "rows": by_queue[queue],
                "message": f"{by_queue[queue]} live row(s) in queue {queue!r} on "
                f"{alias!r}, which no declared job nor the QUEUES setting names",
            }
        )
    return found


def refusal(handle: Declared, stored: Any) -> JobsError | None:
    """Why this code would refuse ``stored`` before the body runs, or None."""
    definition = handle.definition
    settings = get_settings()
    try:
        payload.decode(
            definition.name,
            definition.signature,
            stored,
            max_depth=settings.MAX_INPUT_DEPTH,
            redaction=cached_redaction(definition.redact, settings.REDACT),
            version=definition.version,
            upgrade=definition.upgrade,
        )
    except JobsError as exc:
        return exc
    return None


def _inputs(alias: str, handle: Declared, sample: int) -> list[dict[str, Any]]:
    rows = (
        _live(alias)
        .filter(name=handle.name)
        .order_by("id")
        .values_list("id", "input")[:sample]
    )
    checked = refused = 0
    example: dict[str, str] | None = None
    for pk, stored in rows:
        checked += 1
        error = refusal(handle, stored)
        if error is not None:
            refused += 1
            if example is None:
                example = {"id": str(pk), "error": f"{error.code}: {error.message}"}
    if not refused:
        return []
    assert example is not None  # noqa: S101 - set with the first refusal
    return [
        {
            "code": "input_refused",
            "alias": alias,
            "name": handle.name,
            "checked": checked,
            "refused": refused,
            "example": example,
            "message": f"{refused} of {checked} sampled live row(s) of job "
            f"{handle.name!r} on {alias!r} hold an input its signature refuses "
            f"(e.g. {example['id']}: {example['error']})",
        }
    ]


def _tasks(alias: str, tasks: TaskRegistry) -> list[dict[str, Any]]:
    marks = (
        TaskWatermark.objects.using(alias)
        .filter(kind="task")
        .order_by("name")
        .values_list("name", "last_fired_at")
    )
    return [
        {
            "code": "task_disappeared",
            "alias": alias,
            "name": name,
            "last_fired_at": None if fired is None else fired.isoformat(),
            "message": f"cron task {name!r} has a stored watermark on {alias!r} but "
            "this code does not declare it: it will not fire again",
        }
        for name, fired in marks
        if name not in tasks
    ]


def _schedules(alias: str, jobs: Registry) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for key, name, stored in (
        Schedule.objects.using(alias)
        .order_by("key")
        .values_list("key", "job", "input")[:MAX_SAMPLE]
    ):
        if name not in jobs:
            found.append(
                {
                    "code": "schedule_job_undeclared",
                    "alias": alias,
                    "key": key,
                    "name": name,
                    "message": f"schedule {key!r} on {alias!r} fires job {name!r}, "
                    "which this code does not declare",
                }
            )
        elif (error := refusal(jobs.get(name), stored)) is not None:
            found.append(
                {
                    "code": "schedule_input_refused",
                    "alias": alias,
                    "key": key,
                    "name": name,
                    "error": f"{error.code}: {error.message}",
                    "message": f"schedule {key!r} on {alias!r} holds an input job "
                    f"{name!r} refuses: {error.code}: {error.message}",
                }
            )
    return found
