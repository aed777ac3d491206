"""A PostgreSQL restart under a running worker (W7), on a PRIVATE server this module
starts (pgserver), never the machine's shared one: idle and busy, the worker logs,
reconnects and carries on, and no finished job runs again."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import REPO, database_url, wait_for
from tests.testapp.jobs import hold_file, touch
from ultimate_jobs.enqueue import array_params, build_rows
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.processes


class PrivateServer:
    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver import _commands
            from pgserver.postgres_server import get_server
        self._commands = _commands
        self.dir = Path(tempfile.mkdtemp(prefix="uj-pg-"))
        self.server = get_server(self.dir, cleanup_mode=None)
        info = self.server.get_postmaster_info()
        self.socket_dir = str(info.socket_dir)
        self.url = database_url(
            {"USER": "postgres", "HOST": self.socket_dir, "NAME": "postgres"}
        )

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.socket_dir, dbname="postgres", user="postgres", autocommit=True
        )

    def restart(self) -> None:
        self._commands.pg_ctl(  # type: ignore[attr-defined]
            ["-w", "-m", "fast", "restart"],
            pgdata=self.dir,
            user=self.server.system_user,
        )

    def stop(self) -> None:
        try:
            self._commands.pg_ctl(  # type: ignore[attr-defined]
                ["-w", "-m", "immediate", "stop"],
                pgdata=self.dir,
                user=self.server.system_user,
            )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivateServer]:
    server = PrivateServer()
    try:
        env = {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": server.url,
            "PATH": "/usr/bin:/bin",
        }
        subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "migrate", "-v0"],
            cwd=REPO,
            env=env,
            check=True,
        )
        yield server
    finally:
        server.stop()


def enqueue(server: PrivateServer, handle, **kwargs) -> Any:
    [row] = build_rows(handle, [kwargs])
    with server.connect() as conn:
        conn.execute(QUERIES["job_enqueue"].text, {"now": None, **array_params([row])})
    return row.id


def job_state(server: PrivateServer, job_id) -> tuple[str, int] | None:
    with server.connect() as conn:
        return conn.execute(
            "SELECT state, attempt FROM ultimate_jobs_job WHERE id = %s", [job_id]
        ).fetchone()


def records(server: PrivateServer, key: str) -> list[tuple[str, int]]:
    with server.connect() as conn:
        return conn.execute(
            "SELECT event, attempt FROM testapp_record WHERE key = %s ORDER BY id",
            [key],
        ).fetchall()


def test_an_idle_worker_reconnects_after_a_restart(private_pg, start_worker):
    worker = start_worker(
        "--concurrency",
        "2",
        database_url_=private_pg.url,
        LEASE="5s",
        IDLE_POLL_MAX="250ms",
    )
    before = enqueue(private_pg, touch, key="before", tenant="t")
    wait_for(lambda: job_state(private_pg, before) == ("done", 1))
    private_pg.restart()
    worker.wait_log("jobs.claim.failed")
    worker.wait_log("jobs.db.reconnected")
    after = enqueue(private_pg, touch, key="after", tenant="t")
    wait_for(lambda: job_state(private_pg, after) == ("done", 1))
    assert records(private_pg, "before") == [("ran", 1)]
    assert records(private_pg, "after") == [("ran", 1)]


def test_a_busy_worker_finishes_its_job_once_across_a_restart(
    private_pg, start_worker, tmp_path
):
    worker = start_worker(
        "--concurrency",
        "2",
        database_url_=private_pg.url,
        LEASE="10s",
        IDLE_POLL_MAX="250ms",
    )
    finished = [
        enqueue(private_pg, touch, key=f"done-{i}", tenant="t") for i in range(5)
    ]
    wait_for(lambda: all(job_state(private_pg, j) == ("done", 1) for j in finished))
    flag = str(tmp_path / "busy")
    job_id = enqueue(private_pg, hold_file, key="busy", path=flag)
    wait_for(lambda: Path(flag + ".log").exists())
    private_pg.restart()  # the body is mid-run; its worker's connections all break
    Path(flag + ".release").touch()
    wait_for(lambda: job_state(private_pg, job_id) == ("done", 1))
    assert Path(flag + ".log").read_text() == "started 1\nfinished 1\n"
    # A job enqueued afterwards runs, and none of the finished ones ran again.
    after = enqueue(private_pg, touch, key="after-busy", tenant="t")
    wait_for(lambda: job_state(private_pg, after) == ("done", 1))
    for i in range(5):
        assert records(private_pg, f"done-{i}") == [("ran", 1)]
    assert "jobs.settle.retrying" in worker.log() or "jobs.claim.failed" in worker.log()
