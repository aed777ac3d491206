"""The connection budget with real processes on a PRIVATE PostgreSQL at
max_connections = 20 (issue 31 item 6): four workers sized by the arithmetic of
docs/operations.md leave operators their reserve, so ``jobs stats`` answers while they
drain; the worker that crosses the budget says so at its start; no body completes
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
# Each worker: claim loop, heartbeat, acks and a pool of 1 (WAKE off): 4 connections,
# 16 for the fleet; max_connections 20 less 3 superuser slots less the operator
# reserve of 3 is 14, so the fourth worker is over the budget and says so.
WORKER_ARGS = ("--roles", "worker", "--queues", "default", "--concurrency", "1")
WORKER_SETTINGS = {"WAKE": "false", "POOL_SIZE": "1"}


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
    workers = [
        start_worker(*WORKER_ARGS, database_url_=small_pg.url, **WORKER_SETTINGS)
        for _ in range(WORKERS)
    ]
    assert "jobs.connections.over-budget" not in workers[0].log()
    assert "jobs.connections.over-budget" in workers[-1].log()
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
    assert fleet == (WORKERS * 4,)
    workers_line = operator(small_pg, "workers")
    assert workers_line.returncode == 0, workers_line.stderr
    assert f"fleet={WORKERS * 4} (acks=4 heartbeat=4 pool=4 worker=4)" in (
        workers_line.stdout
    )
