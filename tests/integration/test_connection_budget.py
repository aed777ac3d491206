"""The connection budget and commit durability checks (issue 31 items 5 and 6): what
a process opens by role, the server's room for it, the start-up warnings, the system
checks W002/W003, the fleet line of ``jobs workers``, and the relay's sessions that
commit synchronously whatever the alias's default."""

from __future__ import annotations

import io
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections

from ultimate_jobs.checks import check_servers
from ultimate_jobs.conf import get_settings, load_settings
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.runtime.budget import (
    OPERATOR_RESERVE,
    ServerRoom,
    budget_problem,
    durability_problem,
    process_connections,
    server_room,
    warn_at_start,
)
from ultimate_jobs.runtime.relay import Relay

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("roles", "concurrency", "values", "expected"),
    [
        # The same arithmetic tests/acceptance/test_connections_processes.py measures,
        # plus up to one Django connection per handler thread for the bodies' own ORM
        # queries (issue 31: a body refused one used to dead-letter).
        (
            ("worker",),
            4,
            {"POOL_SIZE": 2},
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 2, "bodies": 4, "wake": 1},
        ),
        (
            ("worker",),
            2,
            {},
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 2, "bodies": 2, "wake": 1},
        ),
        (
            ("worker", "scheduler", "relay"),
            8,
            {},
            {
                "worker": 1,
                "heartbeat": 1,
                "acks": 1,
                "pool": 4,
                "bodies": 8,
                "wake": 1,
                "scheduler": 1,
                "relay": 1,
            },
        ),
        (
            ("worker",),
            8,
            {"WAKE": False, "POOL_SIZE": 3},
            {"worker": 1, "heartbeat": 1, "acks": 1, "pool": 3, "bodies": 8},
        ),
        (("relay",), None, {"WAKE": False}, {"relay": 1}),
    ],
)
def test_a_process_connections_by_role(roles, concurrency, values, expected):
    assert (
        process_connections(load_settings(values, {}), roles, concurrency) == expected
    )


def room(
    synchronous_commit: str = "on", sessions: int = 0, max_connections: int = 20
) -> ServerRoom:
    return ServerRoom(
        synchronous_commit=synchronous_commit,
        max_connections=max_connections,
        superuser_reserved=3,
        sessions=sessions,
    )


def test_the_budget_leaves_the_superuser_slots_and_the_operator_reserve():
    assert room().usable == 20 - 3 - OPERATOR_RESERVE
    assert budget_problem(room(sessions=4), 10) is None  # 14: the last usable one
    problem = budget_problem(room(sessions=5), 10)
    assert problem is not None
    assert "this process opens 10 connections and 5 are open" in problem
    assert "max_connections=20 leaves 14" in problem


@pytest.mark.parametrize(
    ("mode", "refused"),
    [("on", False), ("remote_apply", False), ("off", True), ("local", True)],
)
def test_asynchronous_commit_is_named(mode, refused):
    problem = durability_problem(room(synchronous_commit=mode))
    assert (problem is not None) is refused
    if problem is not None:
        assert f"synchronous_commit={mode}" in problem


def test_the_server_room_is_read_from_the_alias():
    found = server_room("default")
    assert found.max_connections >= 20
    assert found.sessions >= 1  # this test's own session
    assert found.synchronous_commit == "on"


def test_a_process_warns_at_start_when_the_alias_commits_asynchronously(caplog):
    with connection.cursor() as cursor:  # this transaction's sessions, as a default
        cursor.execute("SET LOCAL synchronous_commit = off")
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.runtime.budget"):
        logged = warn_at_start(get_settings(), ["worker"], 2)
    assert "jobs.database.async-commit" in logged
    assert "jobs.database.async-commit" in caplog.text
    assert [m.id for m in check_servers(databases=["default"])] == [
        "ultimate_jobs.W003"
    ]
    assert check_servers(databases=[]) == []  # without --database: no query


def test_over_budget_is_a_start_up_warning_and_w002(caplog, monkeypatch):
    from ultimate_jobs.runtime import budget

    monkeypatch.setattr(
        budget, "OPERATOR_RESERVE", server_room("default").max_connections
    )
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.runtime.budget"):
        assert "jobs.connections.over-budget" in warn_at_start(
            get_settings(), ["worker"]
        )
    [record] = [r for r in caplog.records if r.msg == "jobs.connections.over-budget"]
    assert "for operators" in record.reason
    ids = [m.id for m in check_servers(databases=["default"])]
    assert ids == ["ultimate_jobs.W002"]


def test_jobs_workers_reports_the_fleet_connections():
    out = io.StringIO()
    call_command("jobs", "workers", stdout=out)
    line = out.getvalue().strip().splitlines()[-1]
    assert line.startswith("connections on default: fleet=")
    assert f"operators {OPERATOR_RESERVE})" in line


@pytest.fixture
def asynchronous_default():
    """The alias's sessions commit asynchronously by default (its OPTIONS), as on a
    server configured with synchronous_commit = off."""
    options = connections["default"].settings_dict.setdefault("OPTIONS", {})
    before = options.get("options")
    options["options"] = "-c synchronous_commit=off"
    yield
    if before is None:
        options.pop("options", None)
    else:
        options["options"] = before


def session_mode(db: DirectDatabase) -> str:
    try:
        row = db.connect().execute("SHOW synchronous_commit").fetchone()
        assert row is not None
        return str(row[0])
    finally:
        db.close()


@pytest.mark.usefixtures("asynchronous_default")
def test_the_relay_commits_synchronously_whatever_the_alias_default():
    """Issue 31 item 5: the relay's claim and mark (its source session) and the
    target's insert (deliver) are durable when they return."""
    assert session_mode(DirectDatabase("default")) == "off"  # the alias's default
    relay = Relay(settings=get_settings(), relay_id="durable")
    assert session_mode(relay.source()) == "on"
    relay.publisher.deliver(
        "default", []
    )  # opens the session a cross-alias delivery uses
    assert session_mode(relay.publisher.targets["default"]) == "on"


def test_a_supervisor_refuses_its_processes_together_before_it_forks(monkeypatch):
    """Issue 31: the children of ``--processes P`` start at the same instant and each
    reads the same server state, so each alone fits; the supervisor asks for the P
    together before forking (it used to fork them all)."""
    from ultimate_jobs.management.commands import jobs_worker
    from ultimate_jobs.runtime import budget

    forked: list[int] = []

    def supervise(processes: int) -> int:
        forked.append(processes)
        return 0

    monkeypatch.setattr(jobs_worker, "supervise", supervise)
    per_process = sum(
        process_connections(get_settings(), ["worker"], 8).values()
    )  # 3 + min(POOL_SIZE, 8) + 8 bodies
    found = server_room("default")
    # Room for one process and half of another: one fits, two do not.
    room_left = per_process + per_process // 2
    monkeypatch.setattr(
        budget,
        "OPERATOR_RESERVE",
        found.max_connections - found.superuser_reserved - found.sessions - room_left,
    )
    args = ["jobs_worker", "--roles", "worker", "--concurrency", "8"]
    with pytest.raises(CommandError, match="X_CONNECTION_BUDGET") as refused:
        call_command(*args, "--processes", "2")
    assert f"these 2 processes open {2 * per_process} connections" in str(refused.value)
    assert forked == []
    with pytest.raises(SystemExit):  # --force: forked (here: the stub) all the same
        call_command(*args, "--processes", "2", "--force")
    assert forked == [2]
