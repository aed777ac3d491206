"""Row-level security the database enforces (issue 27, B7, opt-in): ``Note`` declares
``TenantScopedManager(rls=True)`` and the testapp migration creates its policy with
``TenantPolicies``. The job bodies run as an ordinary role (created here, NOT a
superuser: a superuser is never held by row-level security) and read and write through
raw SQL and a manager the guard does not cover; the database holds them to the job's
tenant, lets a NO_TENANT body see nothing and ``cross_tenant`` see everything."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from tests.testapp import tenancy_jobs
from tests.testapp.models import Note, Record
from ultimate_jobs.tenancy import rls

pytestmark = pytest.mark.django_db

ROLE = "ultimate_jobs_rls_app"


@pytest.fixture
def notes() -> None:
    for tenant, body in (("acme", "a1"), ("acme", "a2"), ("globex", "g1")):
        Note.objects.create(tenant_id=tenant, body=body)


@pytest.fixture
def as_app_role() -> Iterator[None]:
    """The rest of the test runs as a role that is not a superuser and does not own
    the tables (made inside the test's transaction: rolled back with it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {ROLE} NOSUPERUSER NOBYPASSRLS NOLOGIN")
        cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {ROLE}")
        cursor.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {ROLE}")
        cursor.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {ROLE}")
        cursor.execute(f"SET ROLE {ROLE}")
        cursor.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        assert cursor.fetchone() == (False, False)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")


def events(key: str) -> list[str]:
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def test_the_policy_is_on_the_table_and_forced():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
            "WHERE relname = 'testapp_note'"
        )
        assert cursor.fetchone() == (True, True)
        cursor.execute(
            "SELECT policyname FROM pg_policies WHERE tablename = 'testapp_note'"
        )
        assert cursor.fetchall() == [(rls.POLICY,)]


def test_raw_sql_and_an_unguarded_manager_see_the_job_s_tenant_only(
    jobs, notes, as_app_role
):
    tenancy_jobs.reads_notes_raw.enqueue(key="acme", tenant="acme")
    tenancy_jobs.reads_notes_raw.enqueue(key="globex", tenant="globex")
    assert [a.outcome for a in jobs.run()] == ["completed", "completed"]
    assert events("acme") == ["raw:a1,a2", "orm:a1,a2", "atomic:2", "step:2"]
    assert events("globex") == ["raw:g1", "orm:g1", "atomic:1", "step:1"]
    # Outside job bodies (a web request, this test) every row is visible.
    assert Note.objects.count() == 3
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM testapp_note")
        assert cursor.fetchone() == (3,)


def test_raw_writes_reach_neither_another_tenant_s_rows_nor_move_into_it(
    jobs, notes, as_app_role
):
    tenancy_jobs.writes_notes_raw.enqueue(key="w", tenant="acme")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("w") == ["updated:2", "refused:42501"]
    assert sorted(Note.objects.values_list("tenant_id", "body")) == [
        ("acme", "a1!"),
        ("acme", "a2!"),
        ("globex", "g1"),
    ]


def test_a_body_without_a_tenant_sees_nothing_unless_it_crosses_visibly(
    jobs, notes, as_app_role
):
    tenancy_jobs.counts_notes.enqueue(key="plain", cross=False)
    tenancy_jobs.counts_notes.enqueue(key="cross", cross=True)
    assert [a.outcome for a in jobs.run()] == ["completed", "completed"]
    assert events("plain") == ["none:0"]
    assert events("cross") == ["cross:3", "none:0"]


def test_without_the_role_change_a_superuser_is_not_held(jobs, notes):
    """Why the tests above change role: a superuser bypasses every policy."""
    tenancy_jobs.reads_notes_raw.enqueue(key="su", tenant="acme")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert events("su")[0] == "raw:a1,a2,g1"
    assert events("su")[-1] == "step:3"
