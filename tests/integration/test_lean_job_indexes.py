"""The hot table's partial indexes still serve every reader (issue 26, migration 0014).

``state_age``, ``tenant`` and ``correlation`` hold only the rows their readers name, so a
ready job of no tenant and no correlation id enters none of them. A partial index serves
a query only when PostgreSQL proves the query's WHERE implies the index's condition:
each reader is planned here with sequential scans off, and must name its index."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import QuerySet

from ultimate_jobs.admin.job_list import FiredByFilter, TenantFilter
from ultimate_jobs.models import Job
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.django_db


def plan(sql: str, params: Any) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def plan_of(queryset: QuerySet[Any]) -> str:
    return plan(*queryset.query.sql_with_params())


def applied(filter_class: Any, value: str) -> QuerySet[Job]:
    found = filter_class.__new__(filter_class)
    found.value = lambda: value
    return found.queryset(None, Job.objects.order_by("-id"))[:100]


def entries(index: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index])
        return [row[0] for row in cursor.fetchall()]


def test_the_three_indexes_hold_only_the_rows_their_readers_name():
    [state_age] = entries("ultimate_jobs_job_state_age")
    [tenant] = entries("ultimate_jobs_job_tenant")
    [correlation] = entries("ultimate_jobs_job_correlation")
    assert "WHERE" in state_age and "'done'" in state_age and "'ready'" not in state_age
    assert "WHERE (tenant_id IS NOT NULL)" in tenant
    assert "WHERE (NOT ((correlation_id)::text = ''::text))" in correlation


def test_fired_by_is_served_by_the_correlation_index():
    assert "ultimate_jobs_job_correlation" in plan_of(
        applied(FiredByFilter, "task:nightly")
    )


def test_a_tenant_s_jobs_are_served_by_the_tenant_index():
    assert "ultimate_jobs_job_tenant" in plan_of(applied(TenantFilter, "acme"))


def test_the_archive_s_clock_and_mover_read_finished_rows_through_state_age():
    clock = plan(QUERIES["archive_clock"].text, {"now": None})
    assert clock.count("ultimate_jobs_job_state_age") == 4, clock
    dead = plan_of(Job.objects.filter(state="dead").order_by("finished_at")[:100])
    assert "ultimate_jobs_job_state_age" in dead, dead
