"""The manifest (J7, seed ``inspectManifest``): what this deploy can run.

Every declared job's ``describe()`` row with the retention the purge applies to it
(defaults filled in, F6), and every declared task's with its next occurrence and the
jobs that occurrence would put on the queue. ``manage.py jobs manifest [--json]`` and
the admin's *Manifest* page read it; tools read the JSON to know which jobs and tasks a
deploy declares before sending it work.

A task's ``fires`` comes from calling the task function for its next occurrence: a
task is synchronous, cheap and does no I/O (C1), so asking it is how the manifest knows
without a second declaration. A task whose function raises there shows ``fires: null``
and the error in ``fires_error``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.retention.jobs import effective_retention
from ultimate_jobs.scheduling.tasks import TaskHandle, TaskRegistry, task_registry


def manifest(
    *,
    jobs: Registry = registry,
    tasks: TaskRegistry = task_registry,
    now: datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """``{"jobs": [...], "tasks": [...]}``, each sorted by name (docs/operations.md)."""
    return {
        "jobs": [
            {
                **handle.describe(),
                "retention": effective_retention(handle.name, jobs=jobs),
            }
            for handle in jobs
        ],
        "tasks": [_task(handle, now or datetime.now(UTC)) for handle in tasks],
    }


def _task(handle: TaskHandle, now: datetime) -> dict[str, Any]:
    row: dict[str, Any] = handle.describe()
    upcoming = handle.next_run(now)
    row["next_run"] = upcoming.isoformat()
    try:
        entries = handle.entries(upcoming)
    except Exception as exc:
        row["fires"] = None
        row["fires_error"] = f"{type(exc).__name__}: {exc}"[:500]
    else:
        row["fires"] = sorted({job.name for job, _ in entries})
        row["fires_error"] = None
    return row
