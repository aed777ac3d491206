"""Operator identity (P2; issue 14, seed ``cancelled_by``): cancel, retry, remove and
promote record who did it (the admin user's id and display name, or the command
line's ``--actor`` / the OS user) in structured fields, shown in the admin and in
``jobs show --json``, and kept after a removal."""

from __future__ import annotations

import getpass
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.testapp.jobs import noop, terminal
from ultimate_jobs import api
from ultimate_jobs.models import Job, JobAction

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(client):
    user = User.objects.create_user(
        "ada", password="pw", is_staff=True, first_name="Ada", last_name="Lovelace"
    )
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_job", "change_job", "delete_job"]
        )
    )
    client.force_login(user)
    return user


def act(client, action: str, *ids) -> None:
    response = client.post(
        reverse("admin:ultimate_jobs_job_changelist"),
        {"action": action, "_selected_action": [str(i) for i in ids]},
    )
    assert response.status_code == 302


def recorded(job_id):
    return list(
        JobAction.objects.filter(job_id=job_id)
        .order_by("id")
        .values_list("action", "actor_id", "actor_name", "source")
    )


def show(job_id) -> dict[str, Any]:
    out = io.StringIO()
    call_command("jobs", "show", str(job_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_admin_actions_record_the_user_s_id_and_display_name(client, ada, jobs):
    dead = terminal.enqueue(key="t")
    jobs.run()
    later = noop.using(delay="1h").enqueue(key="later")
    act(client, "retry_jobs", dead.id)
    act(client, "promote_jobs", later.id)
    act(client, "cancel_jobs", dead.id)
    me = (str(ada.pk), "Ada Lovelace", "admin")
    assert recorded(dead.id) == [("retry", *me), ("cancel", *me)]
    assert recorded(later.id) == [("promote", *me)]
    shown = show(dead.id)["actions"]
    assert [(a["action"], a["actor"]) for a in shown] == [
        ("retry", {"id": str(ada.pk), "name": "Ada Lovelace", "source": "admin"}),
        ("cancel", {"id": str(ada.pk), "name": "Ada Lovelace", "source": "admin"}),
    ]
    assert shown[1]["reason"] == "cancelled by ada"
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[dead.id]))
    html = detail.content.decode()
    assert "cancel  by Ada Lovelace (id " in html
    assert "retry  by Ada Lovelace" in html


def test_a_removal_is_recorded_and_outlives_the_job(client, ada):
    answer = noop.enqueue(key="gone")
    act(client, "remove_jobs", answer.id)
    assert not Job.objects.filter(pk=answer.id).exists()
    [action] = api.job_actions(answer.id)
    assert action["action"] == "remove"
    assert action["actor"] == {
        "id": str(ada.pk),
        "name": "Ada Lovelace",
        "source": "admin",
    }
    assert JobAction.objects.get(job_id=answer.id).job_name == noop.name


def test_the_command_line_records_actor_or_the_os_user(jobs):
    answer = noop.using(delay="1h").enqueue(key="cli")
    out = io.StringIO()
    call_command(
        "jobs", "promote", str(answer.id), "--actor", "bob", "--json", stdout=out
    )
    assert json.loads(out.getvalue())["actor"] == {
        "id": "bob",
        "name": "bob",
        "source": "cli",
    }
    out = io.StringIO()
    call_command("jobs", "cancel", str(answer.id), "--json", stdout=out)
    user = getpass.getuser()
    assert json.loads(out.getvalue())["actor"] == {
        "id": user,
        "name": user,
        "source": "cli",
    }
    assert recorded(answer.id) == [
        ("promote", "bob", "bob", "cli"),
        ("cancel", user, user, "cli"),
    ]
    out = io.StringIO()
    call_command(
        "jobs",
        "bulk",
        "remove",
        "--state",
        "cancelled",
        "--actor",
        "carol",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue()) == {"affected": 1, "remaining": 0}
    assert recorded(answer.id)[-1] == ("remove", "carol", "carol", "cli")


def test_an_actor_past_its_column_or_with_a_nul_is_refused_and_nothing_moves():
    answer = noop.using(delay="1h").enqueue(key="x")
    for bad in ("b" * 256, "bob\x00"):
        with pytest.raises(CommandError, match="X_INVALID_ARGUMENT"):
            call_command("jobs", "promote", str(answer.id), "--actor", bad)
    assert Job.objects.get(pk=answer.id).state == "delayed"
    assert JobAction.objects.count() == 0


def test_the_python_api_records_an_operator(jobs):
    answer = noop.using(delay="1h").enqueue(key="py")
    api.promote(answer.id, actor=api.Operator("svc-7", "nightly cleanup", "api"))
    assert recorded(answer.id) == [("promote", "svc-7", "nightly cleanup", "api")]
    assert api.get(answer.id)["actions"][0]["actor"]["name"] == "nightly cleanup"
