"""Two transactions that settle children of the same two parents in opposite orders
(S11, issue 28): the wake trigger waits for fan-in locks in one key order only, so
neither is aborted as a deadlock, and both parents are made due."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from tests.conftest import conninfo, wait_for
from tests.testapp.workflow_jobs import fan_in_polling, square
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db(transaction=True)

FAN_IN = "SELECT pg_advisory_xact_lock(hashtext('ultimate_jobs.fan_in'), hashtext(%s))"
SETTLE = "UPDATE ultimate_jobs_job SET state = 'done' WHERE id = %s"


def _connect() -> psycopg.Connection[Any]:
    return psycopg.connect(**conninfo(connection.settings_dict))


def _waiting_parent(key: str) -> uuid.UUID:
    parent = fan_in_polling.enqueue(key=key, count=2)
    Job.objects.filter(pk=parent.id).update(
        state="suspended", run_at=timezone.now() + timedelta(hours=1)
    )
    JobStep.objects.create(
        job_id=parent.id, name="wait", kind="jobs", status="waiting", match=[]
    )
    return parent.id


def _running_child(parent: uuid.UUID, key: str) -> uuid.UUID:
    child = square.enqueue(key=key, n=1)
    Job.objects.filter(pk=child.id).update(state="running", parent_id=parent)
    return child.id


def _lock_waiters(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [pid]
        )
        return bool(cursor.fetchone()[0])


def test_settles_of_two_parents_in_opposite_orders_do_not_deadlock():
    parents = [_waiting_parent("p1"), _waiting_parent("p2")]
    with connection.cursor() as cursor:  # the lower fan-in key first
        cursor.execute(
            "SELECT unnest(%s::uuid[]) AS id ORDER BY hashtext(unnest(%s::uuid[])::text)",
            [parents, parents],
        )
        low, high = (row[0] for row in cursor.fetchall())
    a_low, a_high = _running_child(low, "a-low"), _running_child(high, "a-high")
    b_low, b_high = _running_child(low, "b-low"), _running_child(high, "b-high")
    holder, first, second = _connect(), _connect(), _connect()
    errors: list[BaseException] = []

    def commit(conn: psycopg.Connection[Any]) -> None:
        try:
            conn.commit()  # the deferred wake trigger runs here
        except psycopg.Error as error:  # a deadlock: the assertion below reports it
            errors.append(error)

    try:
        holder.execute(FAN_IN, [str(high)])  # the high lock is taken elsewhere
        first.execute(SETTLE, [b_high])  # high, then low
        first.execute(SETTLE, [b_low])
        second.execute(SETTLE, [a_low])  # low, then high
        second.execute(SETTLE, [a_high])
        threads = [
            threading.Thread(target=commit, args=(first,)),
            threading.Thread(target=commit, args=(second,)),
        ]
        threads[0].start()
        wait_for(lambda: _lock_waiters(first.info.backend_pid))  # waits on high
        threads[1].start()  # takes low, then waits on high behind `first`
        wait_for(lambda: _lock_waiters(second.info.backend_pid))
        holder.commit()
        for thread in threads:
            thread.join(timeout=60)
        assert [t.is_alive() for t in threads] == [False, False]
    finally:
        for conn in (holder, first, second):
            conn.close()
    assert errors == []
    assert Job.objects.filter(parent_id__in=parents).exclude(state="done").count() == 0
    # both parents are due now: `high` woken by its last child's settle, `low` nudged
    # by the settle that could not wait for its lock out of order
    due = Job.objects.filter(pk__in=parents, run_at__lte=timezone.now())
    assert sorted(due.values_list("pk", flat=True)) == sorted(parents)
