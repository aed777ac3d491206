"""The worker's handler connections (issue 18, Q3): a fixed pool that threads share one
statement at a time, dialled at once, re-dialled after a break, closed for good."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import wait_for
from ultimate_jobs import sql
from ultimate_jobs.db import DatabasePool
from ultimate_jobs.ground.exceptions import QueryError

pytestmark = pytest.mark.django_db(transaction=True)

[SLEEP] = sql.parse(
    "test.sql",
    "-- name: test_sleep :many\n"
    "-- Hold a connection a little while; answer the backend's pid.\n"
    "SELECT pg_backend_pid() AS pid, pg_sleep(%(seconds)s::float)::text AS slept;\n",
)
NAME = "ultimate_jobs pool test"


def sessions(second_connection) -> int:
    [(count,)] = second_connection.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [NAME]
    ).fetchall()
    return int(count)


def test_open_dials_every_connection_and_close_ends_them(second_connection):
    pool = DatabasePool("default", size=3, application_name=NAME)
    assert sessions(second_connection) == 0
    pool.open()
    assert sessions(second_connection) == 3
    pool.close()
    # A backend leaves pg_stat_activity a moment after its client hung up.
    wait_for(lambda: sessions(second_connection) == 0, message="the sessions to end")
    with pytest.raises(QueryError, match="pool is closed"):
        pool.run(SLEEP, seconds=0)


def test_many_threads_share_the_pool_never_opening_more(second_connection):
    pool = DatabasePool("default", size=2, application_name=NAME)
    pool.open()
    pids: list[int] = []
    start = threading.Barrier(8)

    def use() -> None:
        start.wait()
        for _ in range(3):
            pids.extend(row["pid"] for row in pool.run(SLEEP, seconds=0.01))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(pids) == 24
        assert len(set(pids)) == 2  # both connections served, no third was opened
        assert sessions(second_connection) == 2
    finally:
        pool.close()


def test_a_connection_cut_is_re_dialled_by_the_next_statement(second_connection):
    pool = DatabasePool("default", size=1, application_name=NAME)
    pool.open()
    try:
        [before] = pool.run(SLEEP, seconds=0)
        second_connection.execute("SELECT pg_terminate_backend(%s)", [before["pid"]])
        with pytest.raises(QueryError):
            pool.run(SLEEP, seconds=0)
        [after] = pool.run(SLEEP, seconds=0)
        assert after["pid"] != before["pid"]
        wait_for(lambda: sessions(second_connection) == 1, message="one session")
    finally:
        pool.close()


def test_a_pool_holds_at_least_one_connection():
    with pytest.raises(ValueError, match="at least one"):
        DatabasePool("default", size=0)


def test_the_shared_view_runs_statements_and_cannot_close_the_pool(second_connection):
    """The executor closes its deadline settler's database when done: handed the
    worker's pool, it would close the pool under every handler."""
    pool = DatabasePool("default", size=1, application_name=NAME)
    pool.open()
    try:
        shared = pool.shared()
        assert not hasattr(shared, "close")
        [row] = shared.run(SLEEP, seconds=0)
        assert pool.run(SLEEP, seconds=0)[0]["pid"] == row["pid"]
    finally:
        pool.close()
