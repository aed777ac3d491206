"""Fixtures shared by the suite: real worker processes, waiting on conditions, a second
connection. Every test talks to a real PostgreSQL (DATABASE_URL, or the embedded one)."""

from __future__ import annotations

import os

# Settings come from the test settings only: an operator's ULTIMATE_JOBS_* variables
# must not change what the tests assert.
for _name in list(os.environ):
    if _name.startswith("ULTIMATE_JOBS_"):
        del os.environ[_name]

import inspect  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from urllib.parse import quote  # noqa: E402

import psycopg  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# -- deadlines ------------------------------------------------------------------------
# Process tests wait on conditions, never on sleeps, and their deadlines come from the
# configuration the processes run with (lease, poll), stretched for a busy machine: on
# two shared cores a Django process has taken over 20 s to start. A deadline only
# bounds how long a FAILING test waits; a passing one returns as soon as its condition
# holds, so a generous one costs nothing. UJ_TEST_SLACK scales them all (default 4).
SLACK = float(os.environ.get("UJ_TEST_SLACK", "4"))
LEASE = 30.0  # the LEASE default (conf.py): how long a lapsed claim takes to free
IDLE_POLL = 2.0  # the IDLE_POLL_MAX default: a worker that missed a wake-up polls
PROCESS_START = 30.0  # a quiet machine starts a worker within a few seconds
ROUND_TRIPS = 5.0  # a claim, a body and its settle on a busy machine, at most


def deadline(
    *, lease: float = LEASE, poll: float = IDLE_POLL, work: float = 0.0
) -> float:
    """Seconds to wait for something a worker does within one lease lapse, one idle
    poll and ``work`` seconds of bodies, stretched by SLACK for a loaded machine."""
    return SLACK * (lease + poll + work + ROUND_TRIPS)


def start_deadline() -> float:
    """Seconds a ``manage.py`` process may take to start and say so."""
    return SLACK * PROCESS_START


def _describe(predicate: Callable[[], Any]) -> str:
    """The source of a lambda (``wait_for(lambda: ...)``), else its name."""
    try:
        source = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        return getattr(predicate, "__qualname__", repr(predicate))
    return source if len(source) <= 300 else source[:300] + "..."


def wait_for(
    predicate: Callable[[], Any],
    timeout: float | None = None,
    interval: float = 0.02,
    message: str = "",
) -> Any:
    """Poll ``predicate`` until it answers something truthy; fail after ``timeout``
    (default: ``deadline()``), naming what was awaited and the last answer."""
    timeout = deadline() if timeout is None else timeout
    started = time.monotonic()
    limit = started + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > limit:
            waited = time.monotonic() - started
            raise AssertionError(
                f"timed out after {waited:.1f}s (deadline {timeout:.1f}s) waiting for "
                f"{message or _describe(predicate)}; last answer: {value!r}"
            )
        time.sleep(interval)


def wait_for_progress(
    count: Callable[[], int],
    target: int,
    *,
    stall: float | None = None,
    interval: float = 0.25,
    message: str = "",
) -> None:
    """Wait until ``count()`` reaches ``target``; fail only once it has not moved for
    ``stall`` seconds (default: ``deadline()``). For waits on volume (thousands of
    jobs): a loaded machine makes them slower, not stuck, so no total is imposed."""
    stall = deadline() if stall is None else stall
    started = last_move = time.monotonic()
    seen = count()
    while seen < target:
        time.sleep(interval)
        now_seen = count()
        if now_seen != seen:
            seen, last_move = now_seen, time.monotonic()
        elif time.monotonic() - last_move > stall:
            raise AssertionError(
                f"stuck at {seen} of {target} for {stall:.1f}s (after "
                f"{time.monotonic() - started:.1f}s in all) waiting for "
                f"{message or _describe(count)}"
            )


def database_url(settings_dict: dict[str, Any]) -> str:
    """A DATABASE_URL (django-environ's form) for the database Django is connected to."""
    user = quote(settings_dict.get("USER") or "postgres", safe="")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}" if password else user
    host = settings_dict.get("HOST") or "localhost"
    if host.startswith(
        "/"
    ):  # a socket directory: django-environ reads it from the path
        return (
            f"postgres://{auth}@/{quote(host + '/' + settings_dict['NAME'], safe='')}"
        )
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{auth}@{host}{port}/{settings_dict['NAME']}"


def conninfo(settings_dict: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {
        "dbname": settings_dict["NAME"],
        "user": settings_dict.get("USER") or "postgres",
    }
    for key, name in (("HOST", "host"), ("PORT", "port"), ("PASSWORD", "password")):
        if settings_dict.get(key):
            params[name] = settings_dict[key]
    return params


class WorkerProcess:
    """A ``manage.py jobs_worker`` (or ``command``) subprocess, its output in a file."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        log_path: Path,
        command: str = "jobs_worker",
    ) -> None:
        self.log_path = log_path
        self.command = command
        self.args = args
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), command, *args],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float | None = None) -> None:
        """Wait for ``text`` in the process's output (default: a start deadline)."""
        wait_for(
            lambda: text in self.log() or self.proc.poll() is not None,
            start_deadline() if timeout is None else timeout,
            message=f"{text!r} in the log of {self.describe()}",
        )
        if text not in self.log():
            raise AssertionError(
                f"{self.describe()} exited ({self.proc.returncode}) before logging "
                f"{text!r}; its log ends:\n{self.log()[-2000:]}"
            )

    def describe(self) -> str:
        return f"{self.command} {' '.join(self.args)} (pid {self.pid})"

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to exit (default: a start deadline: a drain is
        bounded by DRAIN_TIMEOUT, far shorter); answer its exit code."""
        try:
            return self.proc.wait(start_deadline() if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.describe()} still running after {timeout or start_deadline()}s;"
                f" its log ends:\n{self.log()[-2000:]}"
            ) from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


# -- PgBouncer ------------------------------------------------------------------------
# UJ_TEST_PGBOUNCER=1 runs every worker, relay and scheduler process of the suite through
# a real PgBouncer in transaction mode (the deployment docs/worker.md describes), with
# WAKE=False and PREPARED_STATEMENTS=False. Tests that need LISTEN/NOTIFY are marked
# ``needs_wake``, tests that find a worker's server session ``needs_session``; both
# are skipped there. .ci/run runs that leg over a subset of the process tests.
PGBOUNCER = os.environ.get("UJ_TEST_PGBOUNCER", "") == "1"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not PGBOUNCER:
        return
    reasons = {
        "needs_wake": "needs LISTEN/NOTIFY: WAKE=False behind PgBouncer",
        "needs_session": "addresses a worker's server session: PgBouncer pools them",
    }
    for item in items:
        for marker, reason in reasons.items():
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


class PgBouncer:
    """A pgbouncer process in transaction mode on a free local port, in front of the
    PostgreSQL server the tests use; its files live in a temporary directory."""

    def __init__(self, settings_dict: dict[str, Any], directory: Path) -> None:
        import socket

        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(binary).exists():
            raise RuntimeError("UJ_TEST_PGBOUNCER=1 needs pgbouncer (apt-get install)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        host = settings_dict.get("HOST") or "127.0.0.1"
        port = settings_dict.get("PORT") or 5432
        user = settings_dict.get("USER") or "postgres"
        directory.chmod(0o777)  # pgbouncer drops root for the postgres user
        (directory / "users.txt").write_text(f'"{user}" ""\n')
        config = directory / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir =\nauth_type = trust\nauth_file = {directory}/users.txt\n"
            "pool_mode = transaction\nmax_client_conn = 1000\n"
            "default_pool_size = 60\n"
            # psycopg sends `options` (-c jit=off); a pooler cannot honour it per client.
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {directory}/pgbouncer.log\npidfile = {directory}/pgbouncer.pid\n"
        )
        (directory / "pgbouncer.log").touch()
        for path in directory.iterdir():
            path.chmod(0o666)
        command = [binary, "-d", str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "postgres"]
        subprocess.run(command, check=True, timeout=30)
        self.pidfile = directory / "pgbouncer.pid"
        self.settings_dict = {**settings_dict, "HOST": "127.0.0.1", "PORT": self.port}
        wait_for(
            lambda: self._answers(), timeout=start_deadline(), message="pgbouncer up"
        )

    def _answers(self) -> bool:
        try:
            with psycopg.connect(**conninfo(self.settings_dict)) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        if self.pidfile.exists():
            os.kill(int(self.pidfile.read_text().split()[0]), signal.SIGTERM)


@pytest.fixture(scope="session")
def pgbouncer_url(django_db_setup: Any) -> Iterator[str | None]:
    """The DATABASE_URL of the test database through PgBouncer (UJ_TEST_PGBOUNCER=1),
    or None: worker processes then reach the database directly."""
    if not PGBOUNCER:
        yield None
        return
    from django.db import connection

    # Not under pytest's tmp_path: its parents are private to root, and pgbouncer runs
    # as the postgres user.
    directory = Path(tempfile.mkdtemp(prefix="uj-pgbouncer-"))
    bouncer = PgBouncer(connection.settings_dict, directory)
    try:
        yield database_url(bouncer.settings_dict)
    finally:
        bouncer.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def worker_env(
    django_db_setup: Any, settings: Any, pgbouncer_url: str | None
) -> Callable[..., dict[str, str]]:
    """The environment a worker subprocess needs to reach the test database (through
    PgBouncer when UJ_TEST_PGBOUNCER=1 and no other database is named)."""
    from django.db import connection

    def make(database_url_: str | None = None, **overrides: str) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_JOBS_")
        }
        env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
        env["DATABASE_URL"] = database_url_ or database_url(connection.settings_dict)
        env["PYTHONUNBUFFERED"] = "1"
        if pgbouncer_url is not None and database_url_ is None:
            env["DATABASE_URL"] = pgbouncer_url
            env["ULTIMATE_JOBS_WAKE"] = "false"
            env["ULTIMATE_JOBS_PREPARED_STATEMENTS"] = "false"
        env.update({f"ULTIMATE_JOBS_{k}": v for k, v in overrides.items()})
        return env

    return make


@pytest.fixture
def start_worker(
    worker_env: Callable[..., dict[str, str]], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real worker processes; every one is killed at the end of the test."""
    started: list[WorkerProcess] = []

    def start(
        *args: str,
        database_url_: str | None = None,
        wait_ready: bool = True,
        **settings: str,
    ) -> WorkerProcess:
        log = tmp_path / f"worker-{len(started)}.log"
        worker = WorkerProcess(list(args), worker_env(database_url_, **settings), log)
        started.append(worker)
        if wait_ready:
            worker.wait_log("jobs.worker.started")
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def second_connection(django_db_setup: Any) -> Iterator[psycopg.Connection[Any]]:
    """An independent autocommit connection to the test database."""
    from django.db import connection

    conn = psycopg.connect(autocommit=True, **conninfo(connection.settings_dict))
    yield conn
    conn.close()


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Forget the jobs a test declares, so declarations do not leak between tests."""
    from ultimate_jobs import registry

    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(name)


@pytest.fixture
def without_app_purge() -> Iterator[None]:
    """Hide the app's own hourly purge task (ultimate_jobs/jobs.py) from the scheduler,
    for tests that count the watermarks and jobs of the tasks they declare."""
    from ultimate_jobs.jobs import purge_hourly
    from ultimate_jobs.scheduling.tasks import task_registry

    task_registry.unregister(purge_hourly.name)
    try:
        yield
    finally:
        task_registry.register(purge_hourly)


@pytest.fixture
def operator(client: Any) -> Any:
    """A staff user who may view jobs (view_job), logged in on the test client. A module
    that needs other permissions defines its own ``operator``."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    return user
