"""Whether the jobs tables are at this release's schema (issue 30): a worker started
before ``manage.py migrate`` says so and stops, rather than logging a missing relation
forever."""

from __future__ import annotations

import importlib
import pkgutil

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.migrations.recorder import MigrationRecorder

from ultimate_jobs.ground.exceptions import MigrationsPending

APP = "ultimate_jobs"


def pending_migrations(alias: str) -> list[str]:
    """The app's migrations not applied on ``alias``, in the order migrate applies them."""
    if _all_applied(alias):
        return []
    # Something looks pending (or cannot be told from the files): Django's own plan,
    # exact for squashed migrations and the order of the dependencies.
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    leaves = [node for node in executor.loader.graph.leaf_nodes() if node[0] == APP]
    return [
        f"{migration.app_label}.{migration.name}"
        for migration, backwards in executor.migration_plan(leaves)
        if migration.app_label == APP and not backwards
    ]


def _all_applied(alias: str) -> bool:
    """Every migration file of the app is recorded as applied on ``alias``: one query of
    ``django_migrations`` against the names on disk, without the migration graph (which
    imports every app's migrations and the executor: 1.2 MiB of a worker's RSS, N2).
    False when it cannot tell: the caller asks Django's plan."""
    module_name = getattr(settings, "MIGRATION_MODULES", {}).get(
        APP, f"{APP}.migrations"
    )
    if module_name is None:
        return False  # migrations disabled for the app: the plan says nothing pends
    try:
        path = importlib.import_module(module_name).__path__
    except (ImportError, AttributeError):
        return False
    # Which modules the loader takes for migrations (MigrationLoader.load_disk).
    names = {
        name
        for _, name, is_pkg in pkgutil.iter_modules(path)
        if not is_pkg and name[0] not in "_~"
    }
    recorder = MigrationRecorder(connections[alias])
    if not recorder.has_table():
        return False
    applied = set(recorder.migration_qs.filter(app=APP).values_list("name", flat=True))
    return names <= applied


def ensure_migrated(aliases: tuple[str, ...]) -> None:
    """Refuse, with "run manage.py migrate", when an alias that holds jobs tables lacks
    any of the app's migrations."""
    for alias in aliases:
        pending = pending_migrations(alias)
        if pending:
            database = "" if alias == "default" else f" --database {alias}"
            raise MigrationsPending(
                f"DATABASES[{alias!r}] lacks {len(pending)} migration(s) of "
                f"ultimate_jobs ({', '.join(pending)}): run manage.py migrate{database}",
                alias=alias,
                pending=pending,
            )


def migration_problems(aliases: tuple[str, ...]) -> list[MigrationsPending]:
    """The refusals of ``ensure_migrated``, one per alias; none for an alias the check
    cannot reach (the worker says that itself when it starts)."""
    problems = []
    for alias in aliases:
        try:
            ensure_migrated((alias,))
        except MigrationsPending as exc:
            problems.append(exc)
        except DatabaseError:
            continue
    return problems


def refuse_unmigrated(aliases: tuple[str, ...]) -> None:
    """A process's start: MigrationsPending for the first alias that lacks migrations;
    nothing for a database down now (the process reconnects and says so itself)."""
    for problem in migration_problems(aliases):
        raise problem
