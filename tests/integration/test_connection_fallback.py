"""The heartbeat's and the acks' connection falls back on the handler pool when it
cannot be dialled, waiting for the pool at most a third of the lease (issue 31 item
6): on real PostgreSQL, the dial refused by the server (a startup option it rejects,
standing in for "too many clients")."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from django.db import connections

from ultimate_jobs.db import DatabasePool
from ultimate_jobs.ground.exceptions import QueryError
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
def refused_dials(pool: DatabasePool) -> Iterator[None]:
    """From now on the server refuses every new session of the alias."""
    options = connections["default"].settings_dict.setdefault("OPTIONS", {})
    before = options.get("options")
    options["options"] = "-c ultimate_jobs_no_such_setting=1"
    yield
    if before is None:
        options.pop("options", None)
    else:
        options["options"] = before


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
