"""The tenant guard holds (issue 27, B7): a write inside a body can neither move a row
to another tenant nor touch another tenant's row (update, save, bulk_update,
bulk_create(update_conflicts=...), delete); the body's threads and pool calls are held
to its tenant; a queryset built in one job carries nothing of that job's scope to
where it is evaluated later; a NO_TENANT backfill runs under a declared cross-tenant
scope. Two tenants' rows, real PostgreSQL, the testing runner."""

from __future__ import annotations

import logging

import pytest

from tests.testapp import tenancy_jobs
from tests.testapp.models import Document, Record
from ultimate_jobs import backfill
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db

ROWS = (
    ("acme", "a-plan"),
    ("acme", "a-budget"),
    ("acme", "doomed"),
    ("globex", "g-plan"),
    ("globex", "doomed"),
)


@pytest.fixture
def documents():
    for tenant, title in ROWS:
        Document.objects.create(tenant_id=tenant, title=title)


def events(key):
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def rows():
    return sorted(Document.objects.values_list("tenant_id", "title"))


@pytest.mark.parametrize(
    "how",
    [
        "update",
        "save",
        "save_over_foreign",
        "delete_foreign_instance",
        "bulk_update",
        "bulk_update_foreign",
        "bulk_create_conflict",
    ],
)
def test_a_write_that_moves_or_touches_another_tenant_s_row_is_refused(
    jobs, documents, how
):
    tenancy_jobs.tries_write.enqueue(key=how, tenant="acme", how=how)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events(how) == ["X_JOB_TENANT_MISMATCH"]
    assert rows() == sorted(ROWS)  # nothing moved, nothing of globex's touched


def test_a_write_within_the_tenant_still_lands(jobs, documents):
    tenancy_jobs.tries_write.enqueue(key="own", tenant="acme", how="update_own")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("own") == ["ok"]
    assert ("acme", "kept") in rows()


@pytest.mark.django_db(transaction=True)  # the threads read on their own connections
def test_threads_and_pool_calls_a_body_starts_see_its_tenant_only(jobs, documents):
    tenancy_jobs.reads_in_threads.enqueue(key="t", tenant="globex")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("t") == ["thread:doomed,g-plan", "pool:doomed,g-plan"]


def test_a_queryset_built_in_one_job_keeps_nothing_of_its_scope(jobs, documents):
    tenancy_jobs.KEPT.clear()
    tenancy_jobs.builds_queryset.enqueue(key="built", tenant="acme")
    assert [a.outcome for a in jobs.run()] == ["completed"]
    tenancy_jobs.evaluates_kept.enqueue(key="later", tenant="globex")
    assert [a.outcome for a in jobs.run()] == ["completed"]
    assert events("later") == ["saw:doomed,g-plan"]  # globex's rows, not acme's
    # Outside any job (a web request) the kept queryset sees every tenant's rows.
    kept = tenancy_jobs.KEPT[-1]
    assert [d.title for d in kept.all()] == sorted(t for _, t in ROWS)


def test_a_no_tenant_backfill_runs_under_a_declared_cross_tenant_scope(
    jobs, documents, caplog, clean_registry
):
    # A NO_TENANT backfill over a guarded model: it sweeps every tenant's rows under
    # a declared, logged cross-tenant scope (it failed with X_TENANT_SCOPE_REQUIRED).
    retitle_doomed = backfill(
        "testapp.retitle_doomed",
        source=lambda: Document.objects.filter(title="doomed"),
        handle=tenancy_jobs.retitle,
        count=lambda: Document.objects.filter(title="doomed").count(),
        batch=10,
        rate=1000,
    )
    answer = retitle_doomed.enqueue()
    with caplog.at_level(logging.INFO):
        [attempt] = jobs.run()
    assert attempt.outcome == "completed", Job.objects.get(pk=answer.id).last_error
    assert rows().count(("acme", "swept")) == 1
    assert rows().count(("globex", "swept")) == 1
    [logged] = [r for r in caplog.records if r.getMessage() == "jobs.tenant.cross"]
    assert logged.reason == (
        "backfill testapp.retitle_doomed: a NO_TENANT pass over every tenant's rows"
    )
