"""P9: the MCP tools over streamable HTTP (``ultimate_jobs.urls``), authenticated as a
Django user: a token a superuser issued, or a session with its CSRF token. An
unauthenticated client, a revoked token and a session without CSRF get 401 and run
nothing; a token user's permissions decide as over stdio."""

from __future__ import annotations

import json

import anyio
import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as DjangoClient
from django.utils import timezone

from tests.conftest import SLACK
from tests.testapp.jobs import noop
from ultimate_jobs.agents import tokens
from ultimate_jobs.models import AgentToken, Job, JobAction

pytest.importorskip("mcp")

pytestmark = pytest.mark.django_db(transaction=True)
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


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


def _mcp(url: str, token: str | None, script):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def main():
        with anyio.fail_after(30 * SLACK):
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                transport = streamable_http_client(url, http_client=http)
                async with Client(transport, mode="legacy") as client:
                    return await script(client)

    return anyio.run(main)


def test_a_token_user_lists_reads_and_changes_within_its_permissions(live_server):
    url = f"{live_server.url}/jobs/mcp"
    admin = User.objects.create_superuser("root", password="x")
    operator = _user("carol", "view_job", "change_job")
    _row, token = tokens.issue(operator, "laptop agent", by=admin.get_username())
    reader = _user("dave", "view_job")
    _row2, read_token = tokens.issue(reader, "read only")
    dead = _dead("http-dead")

    async def work(client):
        listed = await client.list_tools()
        stats = await client.call_tool("jobs_stats", {})
        removed = await client.call_tool("jobs_remove", {"id": dead})  # delete_job
        retried = await client.call_tool("jobs_retry", {"id": dead})
        return listed, stats, removed, retried

    listed, stats, removed, retried = _mcp(url, token, work)
    assert len(listed.tools) == 12
    queues = {row["queue"]: row for row in json.loads(stats.content[0].text)}
    assert queues["default"]["states"]["dead"] == 1
    assert removed.is_error
    assert "'ultimate_jobs.delete_job'" in removed.content[0].text
    assert not retried.is_error
    assert Job.objects.get(pk=dead).state == "ready"
    [action] = JobAction.objects.filter(job_id=dead)
    assert (action.action, action.actor_name, action.source) == (
        "retry",
        "carol",
        "mcp",
    )
    assert AgentToken.objects.get(user=operator).last_used_at is not None

    async def read_only(client):
        return await client.call_tool("jobs_cancel", {"id": dead, "reason": "x"})

    refused = _mcp(url, read_token, read_only)
    assert refused.is_error and "nothing was changed" in refused.content[0].text
    assert Job.objects.get(pk=dead).state == "ready"


def test_unauthenticated_and_revoked_clients_get_401(live_server, caplog):
    from mcp.shared.exceptions import MCPError

    url = f"{live_server.url}/jobs/mcp"
    user = _user("erin", "view_job", "change_job")
    row, token = tokens.issue(user, "soon revoked")
    web = DjangoClient()
    for headers in ({}, {"Authorization": "Bearer ujt_not-a-token"}):
        answer = web.post(
            "/jobs/mcp",
            json.dumps(INIT),
            content_type="application/json",
            headers={"Accept": ACCEPT, **headers},
        )
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "X_UNAUTHENTICATED"
        assert answer["WWW-Authenticate"].startswith("Bearer")
    assert tokens.revoke(row) is True
    answer = web.post(
        "/jobs/mcp",
        json.dumps(INIT),
        content_type="application/json",
        headers={"Accept": ACCEPT, "Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 401

    async def anything(client):
        return await client.list_tools()

    caplog.clear()
    with pytest.raises(ExceptionGroup) as info:  # the SDK's client, refused at connect
        _mcp(url, None, anything)
    assert info.group_contains(MCPError, match="error response", depth=None)
    refusals = [r for r in caplog.records if getattr(r, "status_code", None) == 401]
    assert refusals and all(r.args == ("Unauthorized", "/jobs/mcp") for r in refusals)
    assert row.token_hash == tokens.digest(token) and token not in row.token_hash


def test_a_session_needs_its_csrf_token():
    user = _user("frank", "view_job")
    web = DjangoClient(enforce_csrf_checks=True)
    web.force_login(user)
    without = web.post(
        "/jobs/mcp",
        json.dumps(INIT),
        content_type="application/json",
        headers={"Accept": ACCEPT},
    )
    assert without.status_code == 401
    web.get("/admin/login/")  # sets the csrftoken cookie
    csrf = web.cookies["csrftoken"].value
    with_token = web.post(
        "/jobs/mcp",
        json.dumps(INIT),
        content_type="application/json",
        headers={"Accept": ACCEPT, "X-CSRFToken": csrf},
    )
    assert with_token.status_code == 200
    assert with_token.json()["result"]["serverInfo"]["name"] == "ultimate-jobs"


def test_only_post_is_served_and_a_broken_message_is_a_parse_error():
    """A GET stream would hold a web worker forever: the stateless endpoint has none."""
    user = _user("gus", "view_job")
    _row, token = tokens.issue(user, "probe")
    web = DjangoClient()
    auth = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    for method in ("get", "delete", "put"):
        answer = getattr(web, method)("/jobs/mcp", headers=auth)
        assert (answer.status_code, answer["Allow"]) == (405, "POST")
        assert answer.json()["error"]["code"] == "X_METHOD_NOT_ALLOWED"
    broken = web.post(
        "/jobs/mcp", "{not json", content_type="application/json", headers=auth
    )
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == -32700  # JSON-RPC's parse error


def test_a_request_past_its_bound_answers_504(monkeypatch):
    import threading

    from ultimate_jobs.agents import server, tools

    user = _user("hal", "view_job")
    _row, token = tokens.issue(user, "slow")
    release = threading.Event()

    def stuck(name, arguments, caller):
        release.wait(30 * SLACK)
        return []

    monkeypatch.setattr(server, "HTTP_TIMEOUT", 0.5)
    monkeypatch.setattr(tools, "call", stuck)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "jobs_stats", "arguments": {}},
    }
    try:
        answer = DjangoClient().post(
            "/jobs/mcp",
            json.dumps(call),
            content_type="application/json",
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": ACCEPT,
                "mcp-protocol-version": "2025-06-18",
            },
        )
    finally:
        release.set()
    assert answer.status_code == 504
    assert answer.json()["error"]["code"] == "X_TIMEOUT"
