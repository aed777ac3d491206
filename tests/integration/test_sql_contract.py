"""Every named statement plans against the migrated schema; the claim uses its index."""

from __future__ import annotations

import io
import typing
import uuid
from datetime import datetime
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from tests.testapp.jobs import noop
from ultimate_jobs import registry, sql
from ultimate_jobs.limits.budgets import claim_parameters
from ultimate_jobs.runtime.rides import NO_RIDE
from ultimate_jobs.sql import rows


@pytest.mark.django_db
@pytest.mark.parametrize("query", sql.QUERIES.values(), ids=lambda q: q.name)
def test_every_statement_plans_with_null_parameters(query):
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + query.text, dict.fromkeys(query.params))
        assert cursor.fetchall()


@pytest.mark.django_db
def test_the_claim_uses_the_partial_ready_index_on_a_large_table():
    noop.enqueue_many([{"key": str(i)} for i in range(20_000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ultimate_jobs_job")
        cursor.execute(
            "EXPLAIN " + sql.QUERIES["job_claim"].text,
            {
                "queues": ["default"],
                "limit": 10,
                "worker_id": "w",
                "lease_seconds": 30.0,
                "names": None,
                "now": None,
                **claim_parameters(registry),
            },
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "ultimate_jobs_job_ready" in plan
    assert "Seq Scan on ultimate_jobs_job" not in plan


@pytest.mark.django_db
def test_the_plain_claim_and_the_staging_pass_use_partial_indexes():
    """W2, W5: on a large table the plain claim walks the ready index and the staging
    pass the delayed and running ones; neither scans the table."""
    noop.enqueue_many([{"key": str(i)} for i in range(20_000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ultimate_jobs_job")
        cursor.execute(
            "EXPLAIN " + sql.QUERIES["job_claim_plain"].text,
            {
                "queues": ["default"],
                "limit": 10,
                "worker_id": "w",
                "lease_seconds": 30.0,
                "names": [noop.name],
                "now": None,
            },
        )
        claim = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(
            "EXPLAIN " + sql.QUERIES["job_stage"].text,
            {
                "queues": ["default"],
                "limit": 500,
                "dropped": [],
                "names": [noop.name],
                "registry": None,
                "registry_lease": 30.0,
                **NO_RIDE,
                "now": None,
            },
        )
        stage = "\n".join(row[0] for row in cursor.fetchall())
    assert "ultimate_jobs_job_ready" in claim
    assert "Seq Scan on ultimate_jobs_job" not in claim
    assert "Seq Scan on ultimate_jobs_job" not in stage


@pytest.mark.django_db
def test_jobs_sql_lists_shows_renders_and_explains():
    out = io.StringIO()
    call_command("jobs_sql", "--list", stdout=out)
    assert "job_claim" in out.getvalue()
    out = io.StringIO()
    call_command("jobs_sql", "--show", "job_claim", stdout=out)
    assert "FOR UPDATE SKIP LOCKED" in out.getvalue()
    out = io.StringIO()
    call_command(
        "jobs_sql",
        "--render",
        "job_claim",
        "-p",
        'queues=["default"]',
        "-p",
        "limit=5",
        stdout=out,
    )
    assert "ARRAY['default']" in out.getvalue() or "'{default}'" in out.getvalue()
    assert "5::integer" in out.getvalue()
    out = io.StringIO()
    call_command(
        "jobs_sql",
        "--explain",
        "job_claim",
        "-p",
        'queues=["default"]',
        "-p",
        "limit=5",
        stdout=out,
    )
    assert "Limit" in out.getvalue()


@pytest.mark.django_db
def test_migrations_are_in_step_with_the_models():
    out = io.StringIO()
    call_command("makemigrations", "ultimate_jobs", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_migrations_apply_in_file_order():
    """Each migration depends on the one numbered before it, so the order Django
    applies them in is the order of the files (no gap, no branch)."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    names = sorted(
        name for app, name in loader.disk_migrations if app == "ultimate_jobs"
    )
    assert names[0] == "0001_initial"
    for number, name in enumerate(names, start=1):
        assert name.startswith(f"{number:04d}_"), names
        migration = loader.disk_migrations[("ultimate_jobs", name)]
        own = [dep for dep in migration.dependencies if dep[0] == "ultimate_jobs"]
        assert own == ([("ultimate_jobs", names[number - 2])] if number > 1 else [])


@pytest.mark.django_db
@pytest.mark.parametrize("door", ["django", "direct"])
def test_a_statement_runs_only_with_exactly_its_parameters(door):
    """A missing parameter would run with a wrong value and an unknown one would be
    dropped without a word (the outbox once lost concurrency_key that way)."""
    from ultimate_jobs.db import DirectDatabase, DjangoDatabase

    db = DjangoDatabase("default") if door == "django" else DirectDatabase("default")
    query = sql.QUERIES["lease_holders"]
    assert query.params == {"key", "now"}
    with pytest.raises(TypeError, match=r"lease_holders: missing parameters \['now'\]"):
        db.run(query, key="k")
    with pytest.raises(
        TypeError, match=r"lease_holders: unknown parameters \['keys'\]"
    ):
        db.run(query, key="k", now=None, keys=["k"])
    assert db.run(query, key="k", now=None) == []
    if isinstance(db, DirectDatabase):
        db.close()


@pytest.mark.django_db
def test_the_worker_connection_reads_timestamps_with_psycopg_loader_as_django_does():
    """N3 (issue 13): the worker's own connection reads timestamptz with psycopg's
    loader (C when installed), not Django's Python one, and answers the same aware
    datetimes Django's connection does; jsonb still arrives as text."""
    from datetime import UTC

    from django.db import connection

    from ultimate_jobs.db import DirectDatabase

    statement = (
        "SELECT '2024-06-01 12:00:00.123456+02'::timestamptz AS at,"
        " '{\"a\": 1}'::jsonb AS doc"
    )
    db = DirectDatabase("default")
    try:
        conn = db.connect()
        loader = conn.adapters.get_loader(
            conn.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT
        )
        assert loader is not None
        assert not loader.__module__.startswith("django")
        direct = conn.execute(statement).fetchone()
    finally:
        db.close()
    with connection.cursor() as cursor:
        cursor.execute(statement)
        django_row = cursor.fetchone()
    assert direct == django_row
    assert direct[0] == datetime(2024, 6, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert direct[0].utcoffset() == django_row[0].utcoffset()
    assert direct[1] == '{"a": 1}'


# PostgreSQL type -> the Python type a typed row declares for it (sql/rows.py).
_PG_TO_PY = {
    "bool": bool,
    "int2": int,
    "int4": int,
    "int8": int,
    "float8": float,
    "text": str,
    "varchar": str,
    "uuid": uuid.UUID,
    "timestamptz": datetime,
    "jsonb": str | dict[str, Any],
    "_uuid": list[uuid.UUID],
    "_int8": list[int],
}


def _described(query) -> list[tuple[str, str]]:
    """The columns PostgreSQL says the statement answers: (name, type name)."""
    connection.ensure_connection()
    conn = connection.connection
    name = f"describe_{query.name}".encode()
    conn.pgconn.prepare(name, query.native.encode())
    try:
        described = conn.pgconn.describe_prepared(name)
        with conn.cursor() as cursor:
            types = {}
            for index in range(described.nfields):
                cursor.execute(
                    "SELECT typname FROM pg_type WHERE oid = %s",
                    [described.ftype(index)],
                )
                types[index] = cursor.fetchone()[0]
        return [
            (described.fname(i).decode(), types[i]) for i in range(described.nfields)
        ]
    finally:
        conn.pgconn.exec_(b"DEALLOCATE " + name)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(rows.ROW_TYPES), ids=str)
def test_each_typed_row_is_what_its_statement_answers(name):
    """The SQL<->Python contract: a typed row's keys are the statement's columns, in
    order, and each key's type (without None) is the column's."""
    declared = typing.get_type_hints(rows.ROW_TYPES[name])
    columns = _described(sql.QUERIES[name])
    assert [column for column, _ in columns] == list(declared)
    for column, pg_type in columns:
        python = declared[column]
        args = [a for a in typing.get_args(python) if a is not type(None)]
        if type(None) in typing.get_args(python):
            python = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
        assert python == _PG_TO_PY[pg_type], (column, pg_type, declared[column])


def test_the_hot_statements_are_typed():
    hot = {
        "job_claim", "job_claim_plain", "job_stage", "job_heartbeat", "job_complete", "job_retry", "job_bury",
        "job_release", "job_enqueue", "job_enqueue_one", "job_holders", "outbox_stage", "outbox_claim",
        "outbox_mark_published", "outbox_release", "leader_acquire", "leader_release",
        "scheduler_sync", "scheduler_fire", "schedule_list",
    }  # fmt: skip
    assert hot <= rows.ROW_TYPES.keys()
