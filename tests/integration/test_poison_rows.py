"""Rows Python cannot read never stop a reader (B4; issue 14, defect 1).

Each test plants a "poison" row with SQL, as an older version or a hand-written UPDATE
would: a timestamp past year 9999 (PostgreSQL stores it, psycopg cannot load it).
Before, every relay pass failed on it (``timestamp too large (after year 10K)``) and
left every staged row unpublished, the claim handed it out and lost the whole batch,
``jobs list`` crashed and the admin's job list answered 500. Now the row is skipped,
recorded and named in the log, and the rows around it move on.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.urls import reverse

from tests.testapp.jobs import noop
from ultimate_jobs import RowUnreadable, api
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job, OutboxMessage
from ultimate_jobs.runtime.relay import Relay

pytestmark = pytest.mark.django_db

YEAR_10000 = "10000-01-01 00:00:00+00"


def poison(table: str, column: str, row_id) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {column} = %s::timestamptz WHERE id = %s",
            [YEAR_10000, row_id],
        )


def test_the_relay_publishes_around_an_unreadable_row_and_retires_it(caplog):
    with transaction.atomic():
        before = noop.enqueue(key="before")
    with transaction.atomic():
        bad = noop.enqueue(key="bad")
        sibling = noop.enqueue(key="sibling")  # same transaction, staged after it
    with transaction.atomic():
        after = noop.enqueue(key="after")
    poison("ultimate_jobs_outbox", "run_at", bad.id)
    relay = Relay(db=DjangoDatabase("default"), relay_id="test")
    with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
        done = relay.run_once()
    assert (done.published, done.set_aside) == (3, 1)
    assert set(Job.objects.values_list("id", flat=True)) == {
        before.id,
        sibling.id,
        after.id,
    }
    retired = OutboxMessage.objects.filter(pk=bad.id).values("published_at", "error")
    [row] = list(retired)
    assert row["published_at"] is not None
    assert row["error"].startswith("X_ROW_UNREADABLE: timestamp too large")
    logged = [r for r in caplog.records if r.getMessage() == "jobs.outbox.unreadable"]
    assert [r.ids for r in logged] == [[str(bad.id)]]
    # The next pass finds nothing left: the row no longer stops anything.
    assert relay.run_once().claimed == 0


def test_the_claim_buries_an_unreadable_row_and_runs_the_others(jobs, caplog):
    first = noop.enqueue(key="1")
    bad = noop.enqueue(key="2")
    last = noop.enqueue(key="3")
    poison("ultimate_jobs_job", "created_at", bad.id)
    with caplog.at_level(logging.ERROR, logger="ultimate_jobs"):
        attempts = jobs.run()
    assert sorted(str(a.job_id) for a in attempts) == sorted(
        [str(first.id), str(last.id)]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, error_code, last_error, lease_owner FROM ultimate_jobs_job "
            "WHERE id = %s",
            [bad.id],
        )
        state, code, last_error, owner = cursor.fetchone()
    assert (state, code, owner) == ("dead", "X_ROW_UNREADABLE", None)
    assert "timestamp too large" in last_error
    logged = [r for r in caplog.records if r.getMessage() == "jobs.claim.unreadable"]
    assert [r.job_id for r in logged] == [str(bad.id)]


def test_jobs_list_answers_the_readable_rows_and_names_the_unreadable_one():
    good = noop.enqueue(key="good")
    bad = noop.enqueue(key="bad")
    poison("ultimate_jobs_job", "run_at", bad.id)
    out = io.StringIO()
    call_command("jobs", "list", "--json", stdout=out)
    page = json.loads(out.getvalue())
    assert [job["id"] for job in page["jobs"]] == [str(good.id)]
    assert [row["id"] for row in page["unreadable"]] == [str(bad.id)]
    assert "timestamp too large" in page["unreadable"][0]["error"]
    text = io.StringIO()
    call_command("jobs", "list", stdout=text)
    assert f"{bad.id}  UNREADABLE" in text.getvalue()
    with pytest.raises(CommandError, match="X_ROW_UNREADABLE"):
        call_command("jobs", "show", str(bad.id), stdout=io.StringIO())
    with pytest.raises(RowUnreadable):
        api.get(bad.id)
    assert api.get(good.id)["id"] == str(good.id)


def test_a_one_row_page_with_the_cursor_on_an_unreadable_row():
    older, bad = sorted(
        (noop.enqueue(key="a"), noop.enqueue(key="b")), key=lambda e: e.id
    )  # pages run newest first: the unreadable row opens the first page
    poison("ultimate_jobs_job", "run_at", bad.id)
    first = api.list_jobs(limit=1)
    assert (first["jobs"], [r["id"] for r in first["unreadable"]]) == (
        [],
        [str(bad.id)],
    )
    second = api.list_jobs(limit=1, after=first["next"])
    assert [job["id"] for job in second["jobs"]] == [str(older.id)]


def test_the_admin_list_shows_the_readable_rows_and_names_the_unreadable_one(client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    good = noop.enqueue(key="good")
    bad = noop.enqueue(key="bad")
    poison("ultimate_jobs_job", "run_at", bad.id)
    page = client.get(reverse("admin:ultimate_jobs_job_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert str(good.id)[:13] in html
    assert f"Job {bad.id}: X_ROW_UNREADABLE" in html
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[bad.id]))
    assert detail.status_code == 302  # "does not exist" message, not a 500
