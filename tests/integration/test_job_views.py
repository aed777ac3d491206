"""What the job views show beyond the row (P1, P3): a backfill's job shows its ledger
row and ``jobs list`` marks the passes in flight (F2); ``enqueued_by`` comes with the
actor's display name (H2)."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse

from tests.testapp.jobs import noop
from tests.testapp.models import Record
from ultimate_jobs import api, backfill
from ultimate_jobs.models import BackfillLedger

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]


def jobs_text(*args):
    out = io.StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


def jobs_json(*args):
    return json.loads(jobs_text(*args, "--json"))


def test_a_backfill_job_shows_its_pass_and_the_list_marks_it_in_flight(jobs):
    """F2: mid-pass (read from inside the pass's own handle()), the job's JSON carries
    its ledger row and the text list marks it; once done, the mark is gone."""
    for i in range(5):
        Record.objects.create(key="views", event="todo", attempt=i)
    seen: dict[str, Any] = {}
    name = f"tests.backfill.{uuid.uuid4().hex[:8]}"

    def handle(rows, token):
        if len(seen) == 0 and rows[0].attempt == 3:  # the second batch
            seen["list"] = api.list_jobs(name=name)
            seen["text"] = jobs_text("list", "--name", name)

    sweep = backfill(name, lambda: Record.objects.filter(key="views"), handle, batch=3)
    answer = sweep.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    [row] = BackfillLedger.objects.filter(name=name)
    [during] = seen["list"]["jobs"]
    assert during["state"] == "running"
    assert during["backfill"] == {
        "pass": row.id,
        "name": name,
        "status": "running",
        "batches": 1,
        "rows": 3,
        "checksum": row.checksum,
        "in_flight": True,
    }
    assert (
        f"{answer.id}  running   1/5  default      {name}  "
        f"[backfill pass {row.id} running: 1 batches, 3 rows]"
    ) in seen["text"]
    after = jobs_json("show", str(answer.id))["backfill"]
    assert (after["pass"], after["status"], after["batches"], after["rows"]) == (
        row.id,
        "done",
        2,
        5,
    )
    assert after["in_flight"] is False
    assert "[backfill" not in jobs_text("list", "--name", name)
    # Any other job has none.
    other = noop.enqueue(key="plain")
    assert jobs_json("show", str(other.id))["backfill"] is None


def test_the_admin_detail_of_a_backfill_job_links_its_pass(jobs, client):
    Record.objects.create(key="admin-views", event="todo")
    name = f"tests.backfill.{uuid.uuid4().hex[:8]}"
    sweep = backfill(
        name, lambda: Record.objects.filter(key="admin-views"), lambda r, t: None
    )
    answer = sweep.enqueue()
    jobs.run()
    [row] = BackfillLedger.objects.filter(name=name)
    user = User.objects.create_superuser("root", password="pw")
    client.force_login(user)
    page = client.get(
        reverse("admin:ultimate_jobs_job_change", args=[answer.id])
    ).content.decode()
    link = reverse("admin:ultimate_jobs_backfillledger_change", args=[row.id])
    assert (
        f'<a href="{link}">pass {row.id}</a> of {name}: done (1 batches, 1 rows)'
        in page
    )
    assert f"checksum {row.checksum[:12]}" in page


def test_enqueued_by_shows_the_actors_display_name(client):
    """H2: the user's full name, else the username; none for a key that names no
    user."""
    ada = User.objects.create_user("ada", first_name="Ada", last_name="Lovelace")
    bob = User.objects.create_user("bob")
    by_ada = noop.using(actor=ada).enqueue(key="a")
    by_bob = noop.using(actor=bob).enqueue(key="b")
    by_bot = noop.using(actor="ops-bot").enqueue(key="c")
    shown = {
        j["idempotency_key"]: (j["enqueued_by"], j["enqueued_by_name"])
        for j in jobs_json("list")["jobs"]
    }
    assert shown == {
        "a": (str(ada.pk), "Ada Lovelace"),
        "b": (str(bob.pk), "bob"),
        "c": ("ops-bot", None),
    }
    assert jobs_json("show", str(by_bob.id))["enqueued_by_name"] == "bob"
    assert jobs_json("show", str(by_bot.id))["enqueued_by_name"] is None
    # The name is read when shown: a renamed user shows the new name.
    ada.last_name = "King"
    ada.save()
    assert api.get(by_ada.id)["enqueued_by_name"] == "Ada King"
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    page = client.get(reverse("admin:ultimate_jobs_job_change", args=[by_ada.id]))
    assert f"Ada King ({ada.pk})" in page.content.decode()
