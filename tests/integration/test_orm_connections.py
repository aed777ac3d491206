"""A handler closes Django's old connections around a body that used the ORM, and
skips the walk on a thread that never connected through Django (N2, issue 26)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from tests import claiming
from tests.testapp.jobs import noop, touch
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.runtime.executor import Executor
from ultimate_jobs.runtime.orm_use import connected_here
from ultimate_jobs.runtime.settle import Settler

pytestmark = pytest.mark.django_db(transaction=True)


def run_in_new_thread(row: Any, db: DirectDatabase) -> dict[str, Any]:
    """Execute ``row`` as a handler thread does; answer what that thread saw."""
    seen: dict[str, Any] = {}

    def handler() -> None:
        seen["connected_before"] = connected_here()
        executor = Executor(Settler(db), manage_connections=True)
        seen["outcome"] = str(executor.execute(row).outcome)
        seen["connected_after"] = connected_here()
        seen["open_after"] = any(
            wrapper.connection is not None
            for wrapper in connections.all(initialized_only=True)
        )

    thread = threading.Thread(target=handler)
    thread.start()
    thread.join(60)
    return seen


def claim_one(db: DirectDatabase) -> Any:
    [row] = claiming.claim(
        db,
        queues=["default"],
        limit=1,
        worker_id="w",
        lease_seconds=30.0,
        names=None,
        now=None,
    )
    return row


def test_a_body_that_used_the_orm_has_its_old_connection_closed_after_it():
    db = DirectDatabase("default")
    touch.enqueue(key="orm", tenant="t")
    seen = run_in_new_thread(claim_one(db), db)
    assert seen == {
        "connected_before": False,
        "outcome": "completed",
        "connected_after": True,
        # CONN_MAX_AGE 0: the connection the body opened is obsolete once it ends,
        # and close_old_connections() after the body closed it.
        "open_after": False,
    }
    db.close()


def test_a_body_that_never_used_the_orm_leaves_the_thread_unconnected():
    db = DirectDatabase("default")
    noop.enqueue(key="plain")
    seen = run_in_new_thread(claim_one(db), db)
    assert seen == {
        "connected_before": False,
        "outcome": "completed",
        "connected_after": False,
        "open_after": False,
    }
    db.close()
