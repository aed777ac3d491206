"""Hardening with real worker processes (B4; issue 14, defects 1 and 3).

* Rows Python cannot read (planted with SQL: a timestamp past year 9999) are settled
  or retired by the worker's claim and relay, named in its log, and every other row
  runs: before, each relay pass and each claim failed on them.
* A body that crashes in any way records its real error: before, ``sys.exit()`` in a
  body and an input nested 496 deep killed the attempt silently, the lease lapsed,
  and the job ended as LEASE_LAPSED_FINAL_ATTEMPT.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction

from tests.conftest import wait_for
from tests.testapp.hardening_jobs import crashes, takes_anything
from tests.testapp.jobs import noop
from ultimate_jobs.models import Job, OutboxMessage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LEASE = 2.0  # seconds: a lapsed lease would show within a few of them
SETTLE = 10 * LEASE  # how long every job may take to end, a lapse and a rescue included


def sql(statement: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def ended(ids) -> dict[str, tuple[str, str, str]]:
    rows = Job.objects.filter(pk__in=ids).values_list(
        "id", "state", "error_code", "last_error"
    )
    return {str(i): (s, c, e) for i, s, c, e in rows if s in ("done", "dead")}


def test_a_worker_settles_unreadable_rows_and_runs_every_other(start_worker):
    with transaction.atomic():
        staged = [noop.enqueue(key=f"staged-{i}") for i in range(3)]
    direct = [noop.enqueue(key=f"direct-{i}") for i in range(3)]
    sql(
        "UPDATE ultimate_jobs_outbox SET run_at = '10000-01-01' WHERE id = %s",
        [staged[1].id],
    )
    sql(
        "UPDATE ultimate_jobs_job SET created_at = '10000-01-01' WHERE id = %s",
        [direct[1].id],
    )
    worker = start_worker("--concurrency", "2", LEASE=f"{LEASE:g}s")
    good = [staged[0].id, staged[2].id, direct[0].id, direct[2].id]
    wait_for(
        lambda: len(ended(good)) == 4,
        timeout=SETTLE,
        message="the four readable jobs done",
    )
    assert {state for state, _, _ in ended(good).values()} == {"done"}
    worker.wait_log("jobs.claim.unreadable", timeout=SETTLE)
    with connection.cursor() as cursor:  # the ORM cannot load the poisoned row
        cursor.execute(
            "SELECT state, error_code FROM ultimate_jobs_job WHERE id = %s",
            [direct[1].id],
        )
        assert cursor.fetchone() == ("dead", "X_ROW_UNREADABLE")
    retired = OutboxMessage.objects.filter(pk=staged[1].id).values_list(
        "error", flat=True
    )
    assert retired[0].startswith("X_ROW_UNREADABLE")
    assert not Job.objects.filter(pk=staged[1].id).exists()
    log = worker.log()
    assert f"job_id={direct[1].id}" in log
    assert "jobs.outbox.unreadable" in log and str(staged[1].id) in log


def test_a_crash_of_any_kind_records_its_real_error(start_worker):
    hows = ("exit", "recursion", "memory", "generator-exit")
    answers = {how: crashes.enqueue(key=how, how=how) for how in hows}
    deep = takes_anything.enqueue(key="deep", data=[])
    nested: object = []
    for _ in range(495):
        nested = [nested]
    sql(
        "UPDATE ultimate_jobs_job SET input = %s::jsonb WHERE id = %s",
        [json.dumps({"key": "deep", "data": nested}), deep.id],
    )
    start_worker("--concurrency", "2", LEASE=f"{LEASE:g}s")
    ids = [a.id for a in answers.values()] + [deep.id]
    wait_for(lambda: len(ended(ids)) == 5, timeout=SETTLE, message="five jobs ended")
    results = ended(ids)
    expected = {
        "exit": "SystemExit: 3",
        "recursion": "RecursionError",
        "memory": "MemoryError: simulated",
        "generator-exit": "GeneratorExit: closed",
    }
    for how, answer in answers.items():
        state, _, last_error = results[str(answer.id)]
        assert state == "dead", how
        assert expected[how] in last_error, (how, last_error[:200])
        assert "LEASE_LAPSED" not in last_error
    state, code, last_error = results[str(deep.id)]
    assert (state, code) == ("dead", "X_INPUT_TOO_DEEP")
    assert "LEASE_LAPSED" not in last_error
