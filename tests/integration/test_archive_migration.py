"""Migration 0007 renames the partitioned history of finished jobs to the archive (Q2,
issue 25): on a database that already has day partitions and rows, every table,
partition, index and function moves to its new name, the rows stay, the functions
work on the renamed table, and the reverse puts every old name back.

0006 and 0007 are run as written, in a scratch schema first on the search path, inside
the test's transaction (rolled back after): the suite's own tables are not touched.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

initial = import_module("ultimate_jobs.migrations.0006_history")
renaming = import_module("ultimate_jobs.migrations.0007_archive")

SCHEMA = "uj_archive_rename"
ROW = """
INSERT INTO ultimate_jobs_job_history (
    id, run_id, name, queue, priority, state, input, idempotency_key, attempt,
    max_attempts, run_at, created_at, finished_at, worker_id, last_error, error_code,
    stop_reason, correlation_id, enqueued_by, trail
) VALUES (
    gen_random_uuid(), gen_random_uuid(), 'app.job', 'default', 0, 'done', '{}', '',
    1, 1, now(), now(), %s, '', '', '', '', '', '', '{}'
)
"""


def names(cursor: Any) -> list[str]:
    """Every relation of the scratch schema (tables, partitions, indexes) and every
    function, by name."""
    cursor.execute(
        "SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid ="
        " relnamespace WHERE nspname = %s"
        " UNION ALL SELECT proname FROM pg_proc JOIN pg_namespace ON"
        " pg_namespace.oid = pronamespace WHERE nspname = %s ORDER BY 1",
        [SCHEMA, SCHEMA],
    )
    return sorted(name for (name,) in cursor.fetchall())


def test_0007_renames_a_history_with_partitions_and_rows_and_back():
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {SCHEMA}")
        cursor.execute(f"SET LOCAL search_path TO {SCHEMA}, public")
        cursor.execute(initial.HISTORY_SQL)
        cursor.execute(
            "SELECT ultimate_jobs_history_ensure('2026-01-01', '2026-01-03')"
        )
        for day in ("2026-01-01 12:00Z", "2026-01-02 12:00Z", "2026-01-02 13:00Z"):
            cursor.execute(ROW, [day])
        before = names(cursor)
        assert "ultimate_jobs_job_history_p20260102" in before
        assert "ultimate_jobs_job_history_p20260102_pkey" in before

        cursor.execute(
            renaming.rename(
                renaming.OLD,
                renaming.NEW,
                "ultimate_jobs_history",
                "ultimate_jobs_archive",
            )
        )

        after = names(cursor)
        assert after == sorted(n.replace("history", "archive") for n in before)
        assert not [n for n in after if "history" in n]
        assert {
            "ultimate_jobs_job_archive",
            "ultimate_jobs_job_archive_pkey",
            "ultimate_jobs_job_archive_name_age",
            "ultimate_jobs_job_archive_p20260101",
            "ultimate_jobs_job_archive_p20260103",
            "ultimate_jobs_archive_ensure",
            "ultimate_jobs_archive_drop_before",
        } <= set(after)
        cursor.execute("SELECT count(*) FROM ultimate_jobs_job_archive")
        assert cursor.fetchone() == (3,)
        # The functions work on the renamed table: a new day, then whole days dropped.
        cursor.execute(
            "SELECT ultimate_jobs_archive_ensure('2026-01-03', '2026-01-04')"
        )
        assert cursor.fetchone() == (1,)
        assert "ultimate_jobs_job_archive_p20260104" in names(cursor)
        cursor.execute("SELECT ultimate_jobs_archive_drop_before('2026-01-02')")
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT count(*) FROM ultimate_jobs_job_archive")
        assert cursor.fetchone() == (2,)

        renamed = names(cursor)
        cursor.execute(
            renaming.rename(
                renaming.NEW,
                renaming.OLD,
                "ultimate_jobs_archive",
                "ultimate_jobs_history",
            )
        )
        assert names(cursor) == sorted(n.replace("archive", "history") for n in renamed)
        cursor.execute("SELECT count(*) FROM ultimate_jobs_job_history")
        assert cursor.fetchone() == (2,)
