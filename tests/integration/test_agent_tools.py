"""P9: the tools' arguments and permissions, in-process (``agents.tools.call``), and
the admin's agent tokens: issued by a superuser, shown once, stored as a hash,
revoked at once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as DjangoClient
from django.utils import timezone

from tests.testapp.jobs import noop
from ultimate_jobs.agents import tokens, tools
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.models import AgentToken, Job, JobAction, QueuePause

pytestmark = pytest.mark.django_db


def _user(name: str, *perms: str) -> User:
    user = User.objects.create_user(name, password="x")
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="ultimate_jobs", codename__in=perms
        )
    )
    return User.objects.get(pk=user.pk)  # a fresh permission cache


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "value"),
    [
        ("jobs_list", {"limit": "10"}, "limit", "10"),
        ("jobs_list", {"limit": True}, "limit", True),
        ("jobs_list", {"colour": "red"}, "colour", "red"),
        ("jobs_list", {"state": 3}, "state", 3),
        ("jobs_show", {}, "id", None),
        ("jobs_bulk", {"action": "explode", "state": "dead"}, "action", "explode"),
        ("jobs_retry", {"state": "ready", "queue": "default"}, "state", "ready"),
        ("jobs_pause", {"queue": "x" * 1001}, "queue", "x" * 1001),
        ("jobs_nothing", {}, "tool", "jobs_nothing"),
    ],
)
def test_a_bad_argument_names_its_field_and_value(tool, arguments, field, value):
    root = User.objects.create_superuser("root", password="x")
    with pytest.raises(InvalidArgument) as info:
        tools.call(tool, arguments, root)
    assert (info.value.code, info.value.field, info.value.value) == (
        "X_INVALID_ARGUMENT",
        field,
        value,
    )


def test_a_bulk_remove_needs_delete_job_and_changes_nothing_without_it():
    operator = _user("gina", "view_job", "change_job")
    answer = noop.enqueue(key="bulk-remove")
    Job.objects.filter(pk=answer.id).update(state="dead", finished_at=timezone.now())
    with pytest.raises(tools.ToolRefusedError) as info:
        tools.call("jobs_bulk", {"action": "remove", "state": "dead"}, operator)
    assert "'ultimate_jobs.delete_job'" in str(info.value)
    assert Job.objects.filter(pk=answer.id).exists()
    done = tools.call("jobs_bulk", {"action": "retry", "state": "dead"}, operator)
    assert done == {"affected": 1, "remaining": 0}
    [action] = JobAction.objects.filter(job_id=answer.id)
    assert (action.action, action.actor_name, action.source) == ("retry", "gina", "mcp")


def test_pause_records_the_user_and_a_reader_cannot_pause():
    reader = _user("hank", "view_job")
    with pytest.raises(tools.ToolRefusedError):
        tools.call("jobs_pause", {"queue": "default"}, reader)
    assert not QueuePause.objects.exists()
    operator = _user("ivy", "change_job")
    assert tools.call("jobs_pause", {"queue": "default"}, operator) == {
        "queue": "default",
        "paused": True,
        "was_paused": False,
    }
    assert QueuePause.objects.get(queue="default").paused_by == "ivy (mcp)"
    with pytest.raises(tools.ToolRefusedError) as info:
        tools.call("jobs_stats", {}, operator)  # no view_job: the reads are refused too
    assert str(info.value) == (
        "refused: user 'ivy' lacks the permission 'ultimate_jobs.view_job' to read "
        "jobs (the queues page)"
    )


def test_a_superuser_issues_a_token_in_the_admin_and_revokes_it():
    root = User.objects.create_superuser("root", password="x")
    agent = _user("agent", "view_job")
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__contains="agenttoken")
    )
    web = DjangoClient()
    web.force_login(staff)
    assert web.get("/admin/ultimate_jobs/agenttoken/").status_code == 403
    web.force_login(root)
    answer = web.post(
        "/admin/ultimate_jobs/agenttoken/add/",
        {"name": "laptop", "user": agent.pk},
        follow=True,
    )
    shown = [str(m) for m in answer.context["messages"]]
    [token] = re.findall(r"ujt_[A-Za-z0-9_-]{43}", " ".join(shown))
    row = AgentToken.objects.get()
    assert (row.name, row.user_id, row.created_by) == ("laptop", agent.pk, "root")
    assert row.token_hash == tokens.digest(token) and token not in row.token_hash
    assert row.prefix == token[:12]
    assert tokens.user_of(token) == agent
    page = web.get("/admin/ultimate_jobs/agenttoken/")
    assert token not in page.content.decode()
    web.post(
        "/admin/ultimate_jobs/agenttoken/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    assert AgentToken.objects.get().revoked_at is not None
    assert tokens.user_of(token) is None
    agent.is_active = False
    agent.save()
    _row, second = tokens.issue(agent, "inactive user")
    assert tokens.user_of(second) is None


def test_jobs_mcp_refuses_an_unknown_or_inactive_user_before_serving():
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as info:
        call_command("jobs_mcp", "--user", "nobody")
    assert (
        str(info.value) == "--user='nobody': no such user (give an existing username)"
    )
    User.objects.create_user("gone", password="x", is_active=False)
    with pytest.raises(CommandError) as info:
        call_command("jobs_mcp", "--user", "gone")
    assert str(info.value) == "--user='gone': the user is inactive"
