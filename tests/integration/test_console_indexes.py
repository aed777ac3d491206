"""The console's reads of the archive are served by indexes (issue 27, P7): a job page
counts and lists the job's children in the archive too (S10, Q2), and without an
index on ``parent_id`` that read every archived row (570 ms of a 730 ms page at
1,000,000 jobs, benchmarks/admin_pages.py). The index is on the partitioned table, so
every day's partition, including one created after the migration, has its own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.django_db


def indexed_on_parent(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [table, "%(parent_id, id)%"],
        )
        return [row[0] for row in cursor.fetchall()]


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits"
            " JOIN pg_class child ON child.oid = pg_inherits.inhrelid"
            " JOIN pg_class parent ON parent.oid = pg_inherits.inhparent"
            " WHERE parent.relname = 'ultimate_jobs_job_archive'"
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_archive_and_each_of_its_days_index_a_parent_s_children():
    [definition] = indexed_on_parent("ultimate_jobs_job_archive")
    assert "WHERE (parent_id IS NOT NULL)" in definition
    # A day created after the migration (the leader makes them as jobs finish).
    later = timezone.now() + timedelta(days=400)
    DjangoDatabase("default").run(
        QUERIES["archive_ensure"], first=later.date(), last=later.date()
    )
    days = partitions()
    assert any(day.endswith(later.strftime("%Y%m%d")) for day in days), days
    for day in days:
        assert indexed_on_parent(day), day
