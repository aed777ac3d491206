"""The tenant guard (B7; issue 14): ``TenantScopedManager`` scopes a job body's reads
and writes of the app's own rows to the job's tenant, with two tenants' rows."""

from __future__ import annotations

import logging

import pytest

from tests.testapp.hardening_jobs import (
    reads_documents,
    reads_documents_without_tenant,
    writes_documents,
)
from tests.testapp.models import Document, Record
from ultimate_jobs import InvalidArgument, cross_tenant
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def documents():
    for tenant, title in (
        ("acme", "a-plan"),
        ("acme", "a-budget"),
        ("acme", "doomed"),
        ("globex", "g-plan"),
        ("globex", "doomed"),
    ):
        Document.objects.create(tenant_id=tenant, title=title)


def events(key):
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def test_a_body_reads_its_own_tenant_s_rows_only(jobs, documents):
    reads_documents.enqueue(key="acme", tenant="acme")
    reads_documents.enqueue(key="globex", tenant="globex")
    assert [a.outcome for a in jobs.run()] == ["completed", "completed"]
    assert events("acme") == ["saw:a-budget,a-plan,doomed"]
    assert events("globex") == ["saw:doomed,g-plan"]
    # Outside a job body the manager is a plain one.
    assert Document.objects.count() == 5


def test_a_body_without_a_tenant_reading_tenant_rows_gets_a_coded_error(
    jobs, documents
):
    answer = reads_documents_without_tenant.enqueue(key="none")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    job = Job.objects.get(pk=answer.id)
    assert job.error_code == "X_TENANT_SCOPE_REQUIRED"
    assert "testapp.Document rows are tenant-scoped" in job.last_error
    assert events("none") == []


def test_cross_tenant_lifts_the_guard_and_is_logged(jobs, documents, caplog):
    reads_documents_without_tenant.enqueue(key="all", cross=True)
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.tenancy"):
        [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("all") == ["counted:5"]
    [logged] = [r for r in caplog.records if r.getMessage() == "jobs.tenant.cross"]
    assert logged.reason == "nightly count of every tenant's documents"
    assert logged.job_name == reads_documents_without_tenant.name
    with pytest.raises(InvalidArgument):
        with cross_tenant(reason=" "):
            pass


def test_writes_in_a_body_stay_in_its_tenant(jobs, documents):
    writes_documents.enqueue(key="w", tenant="acme")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("w") == ["X_JOB_TENANT_MISMATCH"]
    assert sorted(Document.objects.values_list("tenant_id", "title")) == [
        ("acme", "made-in-job"),
        ("acme", "renamed"),
        ("acme", "renamed"),
        ("globex", "doomed"),
        ("globex", "g-plan"),
    ]
