"""The start-up migration check (issue 30) without Django's migration graph (N2,
issue 26): a database with every migration file recorded answers from one query; one
that lacks any still gets Django's plan, in migrate's order."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import REPO, start_deadline
from ultimate_jobs.models.migration_state import pending_migrations

pytestmark = pytest.mark.django_db

PROBE = """
import sys
import django
django.setup()
from ultimate_jobs.models.migration_state import refuse_unmigrated
refuse_unmigrated(("default",))
print(sorted(m for m in sys.modules if m.startswith("django.db.migrations.")))
"""


def test_a_migrated_database_has_nothing_pending():
    assert pending_migrations("default") == []


def test_a_migration_missing_from_the_record_is_named_in_migrates_order():
    # The newest two (a consistent history: a migration is unrecorded only with
    # every one after it), whatever they are called in this release.
    last_two = sorted(
        path.stem for path in (REPO / "ultimate_jobs" / "migrations").glob("0*.py")
    )[-2:]
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE app = 'ultimate_jobs'"
            " AND name = ANY(%s)",
            [last_two],
        )
    assert pending_migrations("default") == [f"ultimate_jobs.{n}" for n in last_two]


def test_the_check_of_a_migrated_database_loads_no_migration_graph(worker_env):
    ran = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=start_deadline(),
        check=True,
    )
    loaded = ran.stdout.strip()
    assert "django.db.migrations.loader" not in loaded, loaded
    assert "django.db.migrations.executor" not in loaded, loaded
