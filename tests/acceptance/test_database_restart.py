"""PostgreSQL restarts under running processes (W7, B3), on a PRIVATE server this
module starts (pgserver), never the machine's shared one: a worker idle and busy
reconnects and no finished job runs again; a relay restarted mid-publish publishes
every staged row exactly once; a scheduler whose server restarts at the minute fires
that minute once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, WorkerProcess, deadline, wait_for
from tests.private_pg import PrivateServer
from tests.testapp.jobs import hold_file, noop, touch
from ultimate_jobs.enqueue.rows import array_params, build_rows
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.processes


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
        server.destroy()


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


def stage(server: PrivateServer, handle, inputs: list[dict[str, Any]]) -> list[Any]:
    """Stage rows in the outbox as a transactional enqueue does (O1), committed."""
    rows = build_rows(handle, inputs)
    with server.connect() as conn:
        conn.execute(QUERIES["outbox_stage"].text, {"now": None, **array_params(rows)})
    return [row.id for row in rows]


def outbox_of(server: PrivateServer, ids: list[Any]) -> list[tuple[Any, ...]]:
    """(published, claims, job rows with the row's id) per staged row."""
    with server.connect() as conn:
        return conn.execute(
            "SELECT o.published_at IS NOT NULL, o.claims,"
            " (SELECT count(*) FROM ultimate_jobs_job j WHERE j.id = o.id)"
            " FROM ultimate_jobs_outbox o WHERE o.id = ANY(%s) ORDER BY o.id",
            [ids],
        ).fetchall()


def test_a_relay_restarted_mid_publish_publishes_every_row_exactly_once(
    private_pg, start_worker
):
    """O2, B3: the restart cuts the relay between passes or inside one; it logs the
    failed pass, re-arms, and every row is published once: one job per staged row."""
    relay = start_worker(
        "--roles",
        "relay",
        database_url_=private_pg.url,
        wait_ready=False,
        LEASE="3s",
        IDLE_POLL_MAX="250ms",
    )
    relay.wait_log("jobs.relay.started")
    first = stage(private_pg, noop, [{"key": f"relay-a{i}"} for i in range(50)])
    wait_for(
        lambda: all(p for p, _, _ in outbox_of(private_pg, first)),
        message="the first 50 rows published",
    )
    many = stage(private_pg, noop, [{"key": f"relay-b{i}"} for i in range(3000)])
    private_pg.restart("immediate")  # while the relay works through the 3,000
    relay.wait_log("jobs.outbox.tick-failed")
    last = stage(private_pg, noop, [{"key": f"relay-c{i}"} for i in range(50)])
    staged = first + many + last
    wait_for(
        lambda: all(p for p, _, _ in outbox_of(private_pg, staged)),
        timeout=deadline(lease=3, work=10),
        message="every staged row published after the restart",
    )
    rows = outbox_of(private_pg, staged)
    assert {jobs for _, _, jobs in rows} == {1}  # one job per row, none twice
    with private_pg.connect() as conn:
        [(total,)] = conn.execute(
            "SELECT count(*) FROM ultimate_jobs_job WHERE name = %s"
            " AND idempotency_key LIKE 'relay-%%'",
            [noop.name],
        ).fetchall()
    assert total == len(staged) == 3100
    # A batch cut by the restart was claimed again; every other row exactly once.
    assert {claims for _, claims, _ in rows} <= {1, 2}
    assert "jobs.relay.stopped" not in relay.log()


@pytest.fixture
def start_scheduler(worker_env, tmp_path):
    started: list[WorkerProcess] = []

    def start(url: str, **settings: str) -> WorkerProcess:
        env = worker_env(url, **settings)
        env["DJANGO_SETTINGS_MODULE"] = "tests.settings_scheduler"
        log = tmp_path / f"scheduler-{len(started)}.log"
        process = WorkerProcess([], env, log, command="jobs_scheduler")
        started.append(process)
        process.wait_log("jobs.scheduler.started")
        return process

    yield start
    for process in started:
        process.stop()


def test_a_scheduler_whose_server_restarts_at_the_minute_fires_it_once(
    private_pg, start_scheduler
):
    """C3, C4, B3: the restart lands two seconds before a minute boundary; the leader
    loses its session, takes the lease again and fires that minute once, and every
    minute from the first fire on is fired exactly once (cronapp.every_minute)."""
    with private_pg.connect() as conn:
        [(now,)] = conn.execute("SELECT date_trunc('minute', now())").fetchall()
        conn.execute(
            "INSERT INTO ultimate_jobs_task_watermark (key, kind, name, spec,"
            " last_occurrence) VALUES ('task:cronapp.every_minute', 'task',"
            " 'cronapp.every_minute', '* * * * * UTC', %s - interval '1 minute')",
            [now],
        )

    def fired() -> list[Any]:
        with private_pg.connect() as conn:
            return [
                row[0]
                for row in conn.execute(
                    "SELECT (input->>'occurrence')::timestamptz FROM ultimate_jobs_job"
                    " WHERE name = 'cronapp.minute_job' ORDER BY 1"
                ).fetchall()
            ]

    def seconds_to_the_minute() -> float:
        with private_pg.connect() as conn:
            [(left,)] = conn.execute(
                "SELECT extract(epoch FROM date_trunc('minute', clock_timestamp())"
                " + interval '1 minute' - clock_timestamp())"
            ).fetchall()
        return float(left)

    scheduler = start_scheduler(
        private_pg.url, SCHEDULER_LEASE="3s", SCHEDULER_TICK="250ms"
    )
    [first] = wait_for(fired, timeout=deadline(lease=3), message="the due minute")
    # The leader fires the latest due minute: the watermark's next one, or a later one
    # when a loaded machine started the scheduler after the minute turned.
    with private_pg.connect() as conn:
        [(fired_in,)] = conn.execute(
            "SELECT date_trunc('minute', created_at) FROM ultimate_jobs_job"
            " WHERE name = 'cronapp.minute_job'"
        ).fetchall()
    assert now <= first <= fired_in
    if seconds_to_the_minute() < 4:  # too close to aim: aim at the next one
        wait_for(lambda: seconds_to_the_minute() > 10, timeout=10, interval=0.1)
    wait_for(
        lambda: seconds_to_the_minute() <= 2,
        timeout=70,  # a clock wait: the boundary is at most a minute away
        interval=0.05,
        message="two seconds before the minute",
    )
    with private_pg.connect() as conn:
        [(boundary,)] = conn.execute(
            "SELECT date_trunc('minute', clock_timestamp()) + interval '1 minute'"
        ).fetchall()
    private_pg.restart("fast")
    wait_for(
        lambda: boundary in fired(),
        timeout=deadline(lease=3),
        message=f"the {boundary:%H:%M} occurrence after the restart",
    )
    occurrences = fired()
    minute = timedelta(minutes=1)
    # Every minute from the first fire to the boundary, each exactly once.
    assert occurrences == [first + minute * i for i in range(len(occurrences))]
    assert occurrences[-1] == boundary
    log = scheduler.log()
    assert "jobs.scheduler.round-failed" in log or "jobs.scheduler.lease-failed" in log
