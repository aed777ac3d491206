"""The connection budget with real processes on a PRIVATE PostgreSQL at
max_connections = 20 (issue 31): four workers that together would take every
connection. Before the budget was enforced all four started, the fleet held all 20
sessions and an operator's ``jobs stats`` was refused ("too many clients"); now the
workers that would cross the budget refuse to start (X_CONNECTION_BUDGET, naming the
numbers), ``jobs stats`` answers while the others drain, and no body completes
twice."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import REPO, deadline, wait_for
from tests.private_pg import PrivateServer
from tests.testapp.jobs import noop
from ultimate_jobs.enqueue.rows import array_params, build_rows
from ultimate_jobs.sql import QUERIES

pytestmark = [pytest.mark.processes, pytest.mark.needs_session]

JOBS = 200
WORKERS = 4
# Each worker: claim loop, heartbeat, acks and a pool of 2 (WAKE off): 5 connections,
# 20 for four: every session of the server (the tests connect as a superuser, who may
# take the 3 superuser slots too). Its budget adds up to one Django connection per
# handler thread for the bodies' ORM queries (2; these bodies make none): it plans 7.
# max_connections 20 less 3 superuser slots less the operator reserve of 3 is 14: two
# workers (5 + 1 + 7, then 5 + 5 + 1 + 7 with the session that reads the room) fit,
# the third and fourth would cross it and refuse to start.
PER_WORKER = 5
PLANNED = 7
STARTED = 2
WORKER_ARGS = ("--roles", "worker", "--queues", "default", "--concurrency", "2")
WORKER_SETTINGS = {"WAKE": "false", "POOL_SIZE": "2"}


@pytest.fixture(scope="module")
def small_pg() -> Iterator[PrivateServer]:
    server = PrivateServer(prefix="uj-pg20-")
    try:
        with server.connect() as conn:
            conn.execute("ALTER SYSTEM SET max_connections = 20")  # private server
        server.restart("fast")
        subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "migrate", "-v0"],
            cwd=REPO,
            env=environment(server),
            check=True,
        )
        yield server
    finally:
        server.destroy()


def environment(server: PrivateServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_JOBS_")}
    env |= {"DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": server.url}
    return env


def operator(server: PrivateServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "jobs", *args],
        cwd=REPO,
        env=environment(server),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_operators_keep_their_reserve_and_no_body_completes_twice(
    small_pg, start_worker
):
    with small_pg.connect() as conn:
        assert conn.execute("SHOW max_connections").fetchone() == ("20",)
    workers = []
    for number in range(WORKERS):  # one at a time: each reads the room it starts in
        worker = start_worker(
            *WORKER_ARGS,
            database_url_=small_pg.url,
            wait_ready=number < STARTED,
            **WORKER_SETTINGS,
        )
        if number >= STARTED:
            assert worker.wait() != 0
        workers.append(worker)
    for refused in workers[STARTED:]:
        assert (
            f"X_CONNECTION_BUDGET: max_connections=20: this process opens {PLANNED}"
            in (refused.log())
        )
        assert "jobs.worker.started" not in refused.log()
    for serving in workers[:STARTED]:
        assert "jobs.connections.over-budget" not in serving.log()
    rows = build_rows(noop, [{"key": f"budget-{i}"} for i in range(JOBS)])
    with small_pg.connect() as conn:
        conn.execute(QUERIES["job_enqueue"].text, {"now": None, **array_params(rows)})
    stats = operator(small_pg, "stats", "--json")  # while the fleet drains
    assert stats.returncode == 0, stats.stderr
    assert '"queue": "default"' in stats.stdout

    def finished() -> int:
        with small_pg.connect() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM ultimate_jobs_job WHERE state = 'done')"
                " + (SELECT count(*) FROM ultimate_jobs_job_archive"
                "     WHERE state = 'done')"
            ).fetchone()
            return int(row[0]) if row else 0

    wait_for(lambda: finished() == JOBS, deadline(work=120), message="every job done")
    with small_pg.connect() as conn:
        twice = conn.execute(
            "SELECT job_id, count(*) FROM ultimate_jobs_attempt"
            " GROUP BY job_id HAVING count(*) > 1"
        ).fetchall()
        fleet = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE starts_with(application_name, 'ultimate_jobs ')"
        ).fetchone()
    assert twice == []
    assert fleet == (STARTED * PER_WORKER,)
    workers_line = operator(small_pg, "workers")
    assert workers_line.returncode == 0, workers_line.stderr
    assert f"fleet={STARTED * PER_WORKER} (acks=2 heartbeat=2 pool=4 worker=2)" in (
        workers_line.stdout
    )


@pytest.mark.parametrize(
    ("command", "role"), [("jobs_relay", "relay"), ("jobs_scheduler", "scheduler")]
)
def test_relays_and_schedulers_refuse_to_start_over_budget_unless_forced(
    small_pg, tmp_path, command, role
):
    """Issue 31: a relay or a scheduler started into a full room used to only warn,
    then starve (staged rows unpublished); now it refuses like jobs_worker, on the
    same path, and ``--force`` starts it anyway (with the warning)."""
    held = [small_pg.connect() for _ in range(13)]  # 13 + the room's read: 14 open
    try:
        manage = [sys.executable, str(REPO / "manage.py"), command]
        refused = subprocess.run(
            manage,
            cwd=REPO,
            env=environment(small_pg) | {"ULTIMATE_JOBS_WAKE": "false"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode != 0
        assert (
            "X_CONNECTION_BUDGET: max_connections=20: this process opens 1 "
            "connections and 14 are open"
        ) in refused.stderr
        assert f"jobs.{role}.started" not in refused.stdout + refused.stderr
        log = tmp_path / f"{role}.log"
        with log.open("wb") as out:
            forced = subprocess.Popen(
                [*manage, "--force"],
                cwd=REPO,
                env=environment(small_pg) | {"ULTIMATE_JOBS_WAKE": "false"},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(
                lambda: f"jobs.{role}.started" in log.read_text(errors="replace"),
                deadline(work=60),
                message=f"the forced {role} started",
            )
            assert "jobs.connections.over-budget" in log.read_text(errors="replace")
        finally:
            forced.terminate()
            forced.wait(60)
    finally:
        for conn in held:
            conn.close()
