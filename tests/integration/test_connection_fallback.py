"""The heartbeat's and the acks' connection falls back on the handler pool when it
cannot be dialled, waiting for the pool at most a third of the lease (issue 31 item
6): on real PostgreSQL, the dial refused by the server (a startup option it rejects,
standing in for "too many clients"). An ack connection that BREAKS (its backend
terminated) settles on the pool within a third of the lease, exactly once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connections

from tests import claiming
from tests.conftest import deadline, wait_for
from tests.testapp.jobs import noop
from ultimate_jobs.db import DatabasePool, DirectDatabase
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.fallback import HeldFallback
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.django_db(transaction=True)

STATEMENT = QUERIES["server_room"]


@pytest.fixture
def pool() -> Iterator[DatabasePool]:
    opened = DatabasePool("default", size=1, application_name="ultimate_jobs pool t")
    opened.open()  # dialled before the server refuses new sessions
    yield opened
    opened.close()


@pytest.fixture
def refuse_dials(pool: DatabasePool) -> Iterator[Callable[[], None]]:
    """Calling it makes the server refuse every new session of the alias."""
    options = connections["default"].settings_dict.setdefault("OPTIONS", {})
    before = options.get("options")

    def refuse() -> None:
        options["options"] = "-c ultimate_jobs_no_such_setting=1"

    yield refuse
    if before is None:
        options.pop("options", None)
    else:
        options["options"] = before


@pytest.fixture
def refused_dials(refuse_dials: Callable[[], None]) -> None:
    """From now on the server refuses every new session of the alias."""
    refuse_dials()


def held(pool: DatabasePool, wait: float = 1.0) -> HeldFallback:
    return HeldFallback(
        "default", application_name="ultimate_jobs heartbeat t", backup=pool, wait=wait
    )


@pytest.mark.usefixtures("refused_dials")
def test_a_refused_dial_runs_the_statement_on_the_pool(pool, caplog):
    db = held(pool)
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.runtime.fallback"):
        [row] = db.run(STATEMENT)
    assert row["max_connections"] >= 1
    assert db.fallbacks == 1
    assert "jobs.connection.fallback" in caplog.text


@pytest.mark.usefixtures("refused_dials")
def test_the_fallback_waits_for_the_pool_at_most_its_bound(pool):
    taken = pool._free.get()  # the pool's only connection is busy
    try:
        db = held(pool, wait=0.3)
        started = time.monotonic()
        with pytest.raises(QueryError) as caught:
            db.run(STATEMENT)
        waited = time.monotonic() - started
    finally:
        pool._free.put(taken)
    assert caught.value.query_name == "server_room"
    assert "no pooled connection free within 0.3s" in str(caught.value)
    assert 0.3 <= waited < 2.0


def test_a_dial_that_works_never_touches_the_pool(pool):
    db = held(pool)
    taken = pool._free.get()  # a fallback would wait and fail
    try:
        [row] = db.run(STATEMENT)
    finally:
        pool._free.put(taken)
        db.close()
    assert row["max_connections"] >= 1
    assert db.fallbacks == 0


LEASE = 6.0


def test_a_broken_ack_connection_settles_on_the_pool_within_a_third_of_the_lease(
    pool, refuse_dials
):
    """Before: the acks retried on their own connection for a whole lease (their
    ``hot`` door had no fallback at all), so a full server turned a settled body into
    a lost lease and a second run."""
    noop.enqueue_many([{"key": str(i)} for i in range(2)])
    claimer = DirectDatabase("default")
    rows = claiming.claim(
        claimer,
        queues=["default"],
        limit=2,
        worker_id="w",
        lease_seconds=LEASE,
        names=None,
        now=None,
    )
    claimer.close()
    db = HeldFallback(
        "default",
        application_name="ultimate_jobs acks t",
        backup=pool,
        wait=LEASE / 3,
    )
    acks = Acks(db, retry_for=LEASE)
    told: dict[str, list[bool]] = {"first": [], "second": []}
    assert acks.add(rows[0], None, told["first"].append)
    wait_for(lambda: told["first"], deadline(work=10), message="first ack")
    assert told["first"] == [True] and db.fallbacks == 0
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'ultimate_jobs acks t'"
        )
        assert cursor.fetchall() == [(True,)]
    refuse_dials()  # the server is full: the acks cannot dial again
    started = time.monotonic()
    assert acks.add(rows[1], None, told["second"].append)
    wait_for(lambda: told["second"], deadline(work=LEASE), message="second ack")
    took = time.monotonic() - started
    assert acks.close(timeout=10)
    assert told == {"first": [True], "second": [True]}  # each settled once
    assert took < LEASE / 3
    assert db.fallbacks >= 1
    assert sorted(Job.objects.values_list("state", flat=True)) == ["done", "done"]
