"""The newcomer's path (issue 16): ``./scripts/demo`` as the README runs it.

The demo runs in a subprocess from a clean state: a fresh embedded PostgreSQL in a
private directory (``UJ_PGDATA``), the admin on a free port (``DEMO_PORT``), the venv
this suite runs in (so nothing is installed). It must answer on the admin with data on
every page of the app, restart a worker killed from outside, and stop on SIGINT (a
Ctrl-C) with exit status 0, leaving no process behind: no worker, no web server, no
PostgreSQL, no stale pid in ``.handle_pids.json``.
"""

from __future__ import annotations

import functools
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from tests.conftest import REPO, wait_for

pytestmark = pytest.mark.processes

VENV = Path(sys.prefix)
STAMP = VENV / ".ultimate-jobs-installed"
SETUP_TIMEOUT = 120.0  # a fresh initdb, every migration, the seeds, two processes
STOP_TIMEOUT = 45.0  # the worker's drain (DRAIN_TIMEOUT, 25 s) and the rest
# What demo_seed's work leaves once the worker has run it: a query answering > 0 each.
SEEDED_WORK_DONE = [
    (
        "a webhook the receiver answered with 200 (its signature verified)",
        "SELECT count(*) FROM ultimate_jobs_webhook_delivery WHERE status = 200",
    ),
    (
        "a completed pass of the backfill",
        "SELECT count(*) FROM ultimate_jobs_backfill WHERE status = 'done'",
    ),
    (
        "the steps of demo.onboard_org",
        "SELECT count(*) FROM ultimate_jobs_step AS step"
        " JOIN ultimate_jobs_job AS job ON job.id = step.job_id"
        " WHERE job.name = 'demo.onboard_org'",
    ),
    (
        "a finished job the scheduler leader moved to the archive (Q2, ARCHIVE_AFTER 2s)",
        "SELECT count(*) FROM ultimate_jobs_job_archive",
    ),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def venv_environment() -> dict[str, str]:
    """UJ_* variables under which scripts/_venv.sh finds this venv installed as it is,
    so the demo installs nothing; skip when the suite runs in a venv it did not make."""
    pyproject = (REPO / "pyproject.toml").read_text()
    if VENV.parent != REPO or not STAMP.exists():
        pytest.skip(f"the suite runs outside a venv of scripts/_venv.sh ({VENV})")
    stamp = STAMP.read_text()
    # The stamp is pyproject.toml followed by one line: "<extras> <django pin>".
    if not stamp.startswith(pyproject) or stamp[len(pyproject) :].count("\n") != 1:
        pytest.skip("pyproject.toml changed since this venv was installed")
    extras, _, django = stamp[len(pyproject) :].strip("\n").partition(" ")
    return {
        "UJ_VENV": VENV.name,
        "UJ_PYTHON": sys.executable,
        "UJ_EXTRAS": extras,
        "UJ_DJANGO": django,
    }


class Demo:
    """``scripts/demo`` in its own session, as a terminal's foreground job would be."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        # Not under tmp_path: every pytest that starts (any suite on the machine) chmods
        # /tmp/pytest-of-<user> back to 0700, and the server runs as another user when
        # the tests run as root (as tests/acceptance/test_database_restart.py does).
        self.pgdata = Path(tempfile.mkdtemp(prefix="uj-demo-")) / "pgdata"
        self.log_path = tmp_path / "demo.log"
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")
            and not key.startswith(("ULTIMATE_JOBS_", "UJ_"))
        }
        env.update(venv_environment())
        env.update(DEMO_PORT=str(self.port), UJ_PGDATA=str(self.pgdata))
        self.env = env
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(REPO / "scripts" / "demo")],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # As a shell starts a background job (./scripts/demo &): SIGINT ignored,
            # and inherited so by every child that does not reset it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        self.seen: set[int] = set()  # every pid of the demo's process tree, ever

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and text not in self.log():
                raise AssertionError(
                    f"the demo exited ({self.proc.returncode}) before {text!r}:\n"
                    + self.log()[-4000:]
                )
            return text in self.log()

        wait_for(seen, timeout, interval=0.1, message=f"{text!r} in the demo's output")

    def children(self) -> list[psutil.Process]:
        found = psutil.Process(self.proc.pid).children(recursive=True)
        self.seen.update(p.pid for p in found)
        return found

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self.children() if "jobs_worker" in p.cmdline()]

    def postmaster_pid(self) -> int | None:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return None
        return int(pid_file.read_text().split("\n", 1)[0])

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=str(self.pgdata), dbname="postgres", user="postgres", autocommit=True
        )

    def close(self) -> None:
        """After a failure: stop whatever is left, then the server, then forget it."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in self.seen:  # only ours: a pid may have been reused since
            try:
                process = psutil.Process(pid)
                if process.environ().get("UJ_PGDATA") == str(self.pgdata):
                    process.kill()
            except psutil.Error:
                pass
        if self.postmaster_pid() is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from pgserver import _commands

            _commands.pg_ctl(  # type: ignore[attr-defined]
                ["-w", "-m", "immediate", "stop"],
                pgdata=self.pgdata,
                user="pgserver" if os.geteuid() == 0 else None,
            )
        self._log.close()
        shutil.rmtree(self.pgdata.parent, ignore_errors=True)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(tmp_path)
    try:
        yield running
    finally:
        running.close()


def running(pid: int) -> bool:
    """A zombie has exited: it only waits for its parent (or init) to reap it."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class AdminSession:
    """A logged-in admin user of the demo, over HTTP."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar)
        )
        login = self.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
        assert token, login[:2000]
        form = urllib.parse.urlencode(
            {
                "csrfmiddlewaretoken": token.group(1),
                "username": "admin",
                "password": "admin",
                "next": "/admin/",
            }
        ).encode()
        request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
            self.base + "/admin/login/", data=form, headers={"Referer": self.base}
        )
        with self.opener.open(request, timeout=10) as answer:
            assert answer.url == self.base + "/admin/", answer.url

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as answer:
            assert answer.status == 200, path
            return str(answer.read().decode())


def admin_pages() -> list[str]:
    """The changelist of every model the app registers in the admin."""
    from django.contrib import admin

    return sorted(
        f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for model in admin.site._registry
        if model._meta.app_label == "ultimate_jobs"
    )


def test_the_demo_serves_every_page_restarts_its_worker_and_stops_clean(demo):
    demo.wait_log("==> ready in", SETUP_TIMEOUT)
    assert "==> installing" not in demo.log(), "the demo reinstalled the venv"
    # Issue 30: the login and the URL come last, after the worker's start-up lines and
    # those of the seeded jobs it claimed first, so they do not scroll away.
    log = demo.log()
    login = f"  Log in at http://127.0.0.1:{demo.port}/admin/   user: admin   password: admin\n"
    assert login in log
    assert log.index("jobs.worker.started") < log.index(login)
    assert log.index(login) < log.index("==> ready in")
    server = demo.postmaster_pid()
    assert server is not None and running(server)
    [worker] = demo.worker_pids()

    # Item 6: one of each kind of work, done, so every page of the app lists rows.
    with demo.connect() as db:

        def count(sql: str) -> int:
            row = db.execute(sql).fetchone()
            assert row is not None
            return int(row[0])

        for what, sql in SEEDED_WORK_DONE:
            wait_for(functools.partial(count, sql), 30, message=what)
        assert count("SELECT count(*) FROM auth_user WHERE email <> lower(email)") == 0
    session = AdminSession(demo.port)
    # A changelist's table is result_list; the manifest (declaredjob) draws its own.
    empty = [
        page
        for page in admin_pages()
        if not any(
            table in session.get(page)
            for table in ('id="result_list"', 'id="uj-manifest-jobs"')
        )
    ]
    assert empty == [], f"admin pages without rows: {empty}"
    assert "demo.report-every-5-minutes" in session.get(
        "/admin/ultimate_jobs/schedule/"
    )
    assert "demo.minute_report" in session.get("/admin/ultimate_jobs/taskwatermark/")

    # Item 4: a worker killed from outside is noticed, said loudly, and replaced.
    os.kill(worker, signal.SIGTERM)
    demo.wait_log(f"!!! the worker (pid {worker}) exited with status 0", 30)
    wait_for(
        lambda: demo.worker_pids() not in ([], [worker]), 10, message="a new worker"
    )
    [replacement] = demo.worker_pids()
    assert f"Restarted it: pid {replacement}" in demo.log()
    reseed = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "demo_seed", "--count", "3"],
        cwd=REPO,
        env=demo.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reseed.returncode == 0, reseed.stderr
    with demo.connect() as db:
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM ultimate_jobs_job"
                    " WHERE name = 'demo.send_welcome' AND state <> 'done'"
                ).fetchone()
                == (0,)
            ),
            30,
            message="the replacement worker to run the new jobs",
        )

    # Item 3: Ctrl-C (SIGINT to the foreground process group) stops everything, exit 0.
    demo.children()
    os.killpg(demo.proc.pid, signal.SIGINT)
    assert demo.proc.wait(STOP_TIMEOUT) == 0, demo.log()[-4000:]
    stop = demo.log().partition("==> stopping")[2]
    assert "!!!" not in stop, stop  # nothing killed after a timeout: each stopped
    assert "==> the embedded PostgreSQL stopped" in stop
    assert stop.rstrip().endswith("==> demo stopped (exit status 0)")
    left = [pid for pid in sorted(demo.seen | {server}) if running(pid)]
    assert left == [], [psutil.Process(pid).cmdline() for pid in left]
    assert demo.postmaster_pid() is None
    assert json.loads((demo.pgdata / ".handle_pids.json").read_text()) == []
    strays = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if any(
            str(demo.pgdata) in arg or f"127.0.0.1:{demo.port}" in arg
            for arg in p.info["cmdline"] or []
        )
        and running(p.pid)
    ]
    assert strays == []


def test_the_demo_stops_on_sigterm_before_it_is_ready(demo):
    """A stop during the setup (here: the migrations) still ends with status 0 and
    nothing left running."""
    demo.wait_log("==> migrating the database", SETUP_TIMEOUT)
    demo.children()
    os.kill(demo.proc.pid, signal.SIGTERM)
    assert demo.proc.wait(STOP_TIMEOUT) == 0, demo.log()[-4000:]
    assert "==> demo stopped (exit status 0)" in demo.log()
    assert demo.postmaster_pid() is None
    assert json.loads((demo.pgdata / ".handle_pids.json").read_text()) == []
