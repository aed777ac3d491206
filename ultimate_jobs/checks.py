"""System checks (``manage.py check``).

- ultimate_jobs.E001: ULTIMATE_JOBS has an unknown key.
- ultimate_jobs.E002: an ULTIMATE_JOBS value (or ULTIMATE_JOBS_<KEY> variable) is invalid.
- ultimate_jobs.E003: the jobs database alias is missing or is not PostgreSQL.
- ultimate_jobs.W001: an ULTIMATE_JOBS_<KEY> variable names no setting (a misspelling
  is otherwise silently ignored); the closest known variable is named.
- ultimate_jobs.W002 (``check --database``): a jobs alias's server has no room left
  for operators: its open sessions and one more default worker process exceed
  max_connections minus the superuser slots and the operator reserve (issue 31).
- ultimate_jobs.W003 (``check --database``): a jobs alias commits asynchronously
  (synchronous_commit off or local): see docs/outbox.md (issue 31).
- ultimate_jobs.W005: a Django setting looks like ULTIMATE_JOBS but is not it
  (``ULTIMATE_JOB = {...}``, ``ULTIMATE_JOBS_LEASE = "60s"``): it is ignored.
- ultimate_jobs.W004: a jobs database lacks migrations of the app: "run manage.py
  migrate". A database check (``manage.py check --database default``, and ``migrate``
  itself), as Django's own checks that query are; a warning so that ``migrate`` runs.
  The worker, the relay and the scheduler refuse to start for the same reason.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from ultimate_jobs.conf import load_settings, misnamed_settings, unknown_variables
from ultimate_jobs.ground.exceptions import (
    ConfigurationError,
    JobsError,
    UnknownSetting,
)
from ultimate_jobs.models.migration_state import migration_problems
from ultimate_jobs.runtime.budget import (
    budget_problem,
    durability_problem,
    process_connections,
    server_room,
)


@register("ultimate_jobs")
def check_variables(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W001: a misspelt ULTIMATE_JOBS_* variable, with the closest known one."""
    return [
        Warning(
            f"environment variable {name} names no setting"
            + (f": did you mean {closest}?" if closest else ""),
            hint="See docs/settings.md for every key; the variable is ignored.",
            id="ultimate_jobs.W001",
        )
        for name, closest in unknown_variables()
    ]


@register("ultimate_jobs")
def check_setting_names(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W005: ``ULTIMATE_JOB = {...}`` and other near misses are otherwise silent."""
    return [
        Warning(
            f"settings.{name} is not read by ultimate_jobs"
            + (f": did you mean {meant}?" if meant else ""),
            hint="Every setting goes in one dict, ULTIMATE_JOBS (docs/settings.md).",
            id="ultimate_jobs.W005",
        )
        for name, meant in misnamed_settings(dir(settings))
    ]


@register("ultimate_jobs")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        jobs_settings = load_settings(getattr(settings, "ULTIMATE_JOBS", {}))
    except ConfigurationError as exc:
        unknown = isinstance(exc, UnknownSetting)
        return [
            Error(
                f"ULTIMATE_JOBS[{exc.key!r}] = {exc.value!r}: {exc.reason}",
                hint="See docs/settings.md for every key, its unit and its default.",
                id="ultimate_jobs.E001" if unknown else "ultimate_jobs.E002",
            )
        ]
    alias = jobs_settings.DATABASE
    if alias not in settings.DATABASES:
        return [
            Error(
                f"ULTIMATE_JOBS['DATABASE'] = {alias!r}: no such DATABASES alias",
                id="ultimate_jobs.E003",
            )
        ]
    engine = settings.DATABASES[alias].get("ENGINE", "")
    if "postgresql" not in engine:
        return [
            Error(
                f"DATABASES[{alias!r}]['ENGINE'] = {engine!r}: ultimate_jobs needs PostgreSQL",
                hint="SQLite and MySQL are not supported: the queue relies on SKIP LOCKED, "
                "LISTEN/NOTIFY and partial indexes.",
                id="ultimate_jobs.E003",
            )
        ]
    return []


@register("ultimate_jobs", Tags.database)
def check_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W002, W003: the connection budget and commit durability of every jobs alias
    (runs with ``manage.py check --database <alias>`` and before ``migrate``)."""
    databases = kwargs.get("databases") or []
    try:
        jobs_settings = load_settings(getattr(settings, "ULTIMATE_JOBS", {}))
    except ConfigurationError:
        return []  # E001/E002 say why
    roles = ("worker", "scheduler", "relay")
    planned = sum(process_connections(jobs_settings, roles).values())
    found: list[CheckMessage] = []
    for alias in jobs_settings.aliases:
        if alias not in databases:
            continue
        try:
            room = server_room(alias)
        except JobsError:
            continue  # unreachable: the commands say so when they start
        if (problem := budget_problem(room, planned)) is not None:
            found.append(
                Warning(
                    f"DATABASES[{alias!r}]: {problem}",
                    hint="docs/operations.md: the connection arithmetic",
                    id="ultimate_jobs.W002",
                )
            )
        if (problem := durability_problem(room)) is not None:
            found.append(
                Warning(
                    f"DATABASES[{alias!r}]: {problem}",
                    hint="docs/outbox.md: synchronous_commit and delivery",
                    id="ultimate_jobs.W003",
                )
            )
    return found


@register("ultimate_jobs", Tags.database)
def check_migrations(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """W004: a jobs database (of the ones asked about) lacks the app's migrations."""
    try:
        aliases = load_settings(getattr(settings, "ULTIMATE_JOBS", {})).aliases
    except ConfigurationError:
        return []  # E001/E002 say it
    asked = tuple(alias for alias in aliases if alias in (databases or ()))
    return [
        Warning(
            problem.message,
            hint="Workers refuse to start until it is run.",
            id="ultimate_jobs.W004",
        )
        for problem in migration_problems(asked)
    ]
