"""P9: ``manage.py jobs_mcp --user NAME`` driven by the official ``mcp`` client SDK
over stdio: the tool list, a read, a permitted change with its audit row, and a
refused change that changes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from tests.conftest import SLACK
from tests.testapp.jobs import noop
from ultimate_jobs.agents.tools import TOOLS
from ultimate_jobs.models import Job, JobAction

pytest.importorskip("mcp")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]
ROOT = Path(__file__).resolve().parents[2]


def _user(name: str, *perms: str) -> User:
    user = User.objects.create_user(name, password="x")
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="ultimate_jobs", codename__in=perms
        )
    )
    return user


def _dead(key: str) -> str:
    answer = noop.enqueue(key=key)
    Job.objects.filter(pk=answer.id).update(state="dead", finished_at=timezone.now())
    return str(answer.id)


def _session(user: str, env: dict[str, str], script):
    """Run ``script(client)`` against a jobs_mcp process acting as ``user``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "jobs_mcp", "--user", user],
        env=env,
        cwd=str(ROOT),
    )

    async def main():
        with anyio.fail_after(60 * SLACK):
            async with Client(params, mode="legacy") as client:
                return await script(client)

    return anyio.run(main)


def test_stdio_lists_reads_changes_with_audit_and_refuses(worker_env):
    operator = _user("alice", "view_job", "change_job")
    _user("bob", "view_job")
    dead = _dead("mcp-dead")
    env = worker_env()

    async def as_alice(client):
        listed = await client.list_tools()
        shown = await client.call_tool("jobs_show", {"id": dead})
        retried = await client.call_tool("jobs_retry", {"id": dead})
        bad = await client.call_tool("jobs_list", {"limit": 5000})
        return listed, shown, retried, bad

    listed, shown, retried, bad = _session("alice", env, as_alice)
    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == sorted(tool.name for tool in TOOLS)
    schema = tools["jobs_retry"].input_schema
    assert set(schema["properties"]) == {
        "id",
        "from_step",
        "queue",
        "state",
        "name",
        "tenant",
        "database",
    }
    assert schema["properties"]["state"]["enum"] == [
        "dead",
        "failed",
        "cancelled",
        "done",
    ]
    assert tools["jobs_list"].input_schema["properties"]["limit"]["maximum"] == 200
    assert not shown.is_error
    document = json.loads(shown.content[0].text)
    assert (document["id"], document["state"], document["name"]) == (
        dead,
        "dead",
        "testapp.noop",
    )
    assert not retried.is_error
    assert json.loads(retried.content[0].text)["state"] == "ready"
    assert Job.objects.get(pk=dead).state == "ready"
    [action] = JobAction.objects.filter(job_id=dead)
    assert (action.action, action.actor_id, action.actor_name, action.source) == (
        "retry",
        str(operator.pk),
        "alice",
        "mcp",
    )
    assert bad.is_error
    error = json.loads(bad.content[0].text)["error"]
    assert error["code"] == "X_JOB_PAGE_INVALID"
    assert "limit=5000" in error["message"]

    other = _dead("mcp-refused")

    async def as_bob(client):
        return await client.call_tool("jobs_retry", {"id": other})

    refused = _session("bob", env, as_bob)
    assert refused.is_error
    assert refused.content[0].text == (
        "refused: user 'bob' lacks the permission 'ultimate_jobs.change_job' that "
        "Retry needs in the admin; nothing was changed"
    )
    assert Job.objects.get(pk=other).state == "dead"
    assert not JobAction.objects.filter(job_id=other).exists()
