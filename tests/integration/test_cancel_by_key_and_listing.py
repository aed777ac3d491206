"""Cancel by key (seed cancelByKey, P2) and the job list (P3): ``api.cancel_by_key``,
``jobs cancel --key``, the key filter of ``jobs list`` and of the admin, creation-time
bounds, ``--before`` / ``--after`` cursors, at most 200 a page, bad cursors refused with
X_JOB_PAGE_INVALID. The four live states with a real worker are in
tests/acceptance/test_cancel_by_key_processes.py."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from tests.testapp.durable_jobs import recover_cart
from tests.testapp.jobs import noop, touch
from ultimate_jobs import InvalidArgument, JobPageInvalid, api
from ultimate_jobs.management.verbs import os_user
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def jobs_json(*args):
    out = io.StringIO()
    call_command("jobs", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def state(job_id):
    return Job.objects.get(pk=job_id).state


# -- cancel by key ---------------------------------------------------------------


def test_cancel_by_key_disarms_a_rescheduled_sequence(jobs):
    """S5 + cancelByKey: the staged job keeps its id and key from stage to stage, so
    cancelling the key ends the sequence; the next stage never runs."""
    answer = recover_cart.enqueue(key="cart-7")
    jobs.run()  # stage "remind" runs and reschedules "again" in 1 h
    assert state(answer.id) == "delayed"
    assert api.cancel_by_key(recover_cart, "cart-7", reason="paid") == answer.id
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.stop_reason, row.last_error) == (
        "cancelled",
        "cancelled",
        "paid",
    )
    jobs.travel(timedelta(days=2))
    assert jobs.run() == []
    # Nothing holds the key now: the call answers None and changes nothing.
    assert api.cancel_by_key("testapp.recover_cart", "cart-7") is None


def test_cancel_by_key_names_the_tenant_when_several_hold_the_key(jobs):
    """J2: a key is held per tenant; an ambiguous call cancels nothing."""
    acme = touch.enqueue(key="k", tenant="acme")
    umbrella = touch.enqueue(key="k", tenant="umbrella")
    with pytest.raises(InvalidArgument) as refused:
        api.cancel_by_key("testapp.touch", "k")
    assert refused.value.field == "tenant"
    assert {state(acme.id), state(umbrella.id)} == {"ready"}
    assert api.cancel_by_key("testapp.touch", "k", tenant="umbrella") == umbrella.id
    assert (state(acme.id), state(umbrella.id)) == ("ready", "cancelled")
    assert api.cancel_by_key("testapp.touch", "k") == acme.id  # only one holds it now
    no_tenant = noop.enqueue(key="nt")
    assert api.cancel_by_key("testapp.noop", "nt", tenant=None) == no_tenant.id


def test_bad_names_and_keys_are_refused_and_nothing_moves():
    answer = noop.enqueue(key="x")
    for name, key, field in (
        ("", "x", "name"),
        ("testapp.noop", "", "key"),
        ("testapp.noop", 7, "key"),
        ("testapp.noop", "k" * 513, "key"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            api.cancel_by_key(name, key)
        assert refused.value.field == field
    assert state(answer.id) == "ready"


def test_jobs_cancel_by_key_on_the_command_line():
    answer = noop.enqueue(key="cli")
    who = {"id": os_user(), "name": os_user(), "source": "cli"}  # P2: who, recorded
    assert jobs_json("cancel", "--name", "testapp.noop", "--key", "cli") == {
        "id": str(answer.id),
        "name": "testapp.noop",
        "key": "cli",
        "cancelled": True,
        "actor": who,
    }
    assert jobs_json("cancel", "--name", "testapp.noop", "--key", "cli") == {
        "id": None,
        "name": "testapp.noop",
        "key": "cli",
        "cancelled": False,
        "actor": who,
    }
    out = io.StringIO()
    with pytest.raises(CommandError, match="X_INVALID_ARGUMENT"):
        call_command("jobs", "cancel", "--key", "cli", "--json", stdout=out)
    assert json.loads(out.getvalue())["error"]["code"] == "X_INVALID_ARGUMENT"


def test_the_key_filter_of_jobs_list_and_the_admin(client):
    held = noop.enqueue(key="cart-1")
    noop.enqueue(key="cart-2")
    assert [j["id"] for j in jobs_json("list", "--key", "cart-1")["jobs"]] == [
        str(held.id)
    ]
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    url = reverse("admin:ultimate_jobs_job_changelist")
    page = client.get(url, {"key": "cart-1"})
    assert page.status_code == 200
    assert [str(j.pk) for j in page.context["cl"].result_list] == [str(held.id)]
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[held.id]))
    assert f"{url}?key=cart-1" in detail.content.decode()


# -- the list (P3) ------------------------------------------------------------------


def test_pages_go_both_ways_with_after_and_before():
    ids = [str(a.id) for a in noop.enqueue_many([{"key": str(i)} for i in range(5)])]
    newest_first = ids[::-1]
    first = jobs_json("list", "--limit", "2")
    assert [j["id"] for j in first["jobs"]] == newest_first[:2]
    assert first["previous"] is None
    second = jobs_json("list", "--limit", "2", "--after", first["next"])
    assert [j["id"] for j in second["jobs"]] == newest_first[2:4]
    assert second["previous"] == newest_first[2]
    back = jobs_json("list", "--limit", "2", "--before", second["previous"])
    assert back == first
    last = jobs_json("list", "--limit", "2", "--after", second["next"])
    assert [j["id"] for j in last["jobs"]] == newest_first[4:]
    assert last["next"] is None
    middle = jobs_json("list", "--limit", "2", "--before", last["previous"])
    assert [j["id"] for j in middle["jobs"]] == newest_first[2:4]
    assert (middle["next"], middle["previous"]) == (newest_first[3], newest_first[2])


def test_created_from_and_to_bound_the_creation_time():
    old = Job.objects.create(
        name="testapp.noop",
        idempotency_key="old",
        created_at=timezone.now() - timedelta(days=3),
    )
    new = noop.enqueue(key="new")
    day = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert [j["id"] for j in jobs_json("list", "--created-to", day)["jobs"]] == [
        str(old.id)
    ]
    assert [j["id"] for j in jobs_json("list", "--created-from", day)["jobs"]] == [
        str(new.id)
    ]
    since = (timezone.now() - timedelta(days=4)).isoformat()
    assert len(jobs_json("list", "--created-from", since)["jobs"]) == 2


def test_bad_pages_cursors_and_times_are_refused_with_their_codes():
    for kwargs, field in (
        ({"limit": 201}, "limit"),
        ({"limit": 0}, "limit"),
        ({"after": "nope"}, "after"),
        ({"before": "01234"}, "before"),
        ({"after": "0" * 32, "before": "0" * 32}, "before"),
    ):
        with pytest.raises(JobPageInvalid) as refused:
            api.list_jobs(**kwargs)
        assert (refused.value.code, refused.value.field) == (
            "X_JOB_PAGE_INVALID",
            field,
        )
    assert len(api.list_jobs(limit=200)["jobs"]) == 0
    out = io.StringIO()
    with pytest.raises(CommandError, match="X_JOB_PAGE_INVALID"):
        call_command("jobs", "list", "--before", "zzz", "--json", stdout=out)
    assert json.loads(out.getvalue())["error"]["code"] == "X_JOB_PAGE_INVALID"
    with pytest.raises(CommandError, match="X_INVALID_ARGUMENT"):
        call_command(
            "jobs", "list", "--created-from", "yesterday", stdout=io.StringIO()
        )
