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


def test_a_body_ignoring_its_timeout_is_logged_counted_and_reported(
    start_worker, client
):
    """Defect 7: a body that ignores its timeout kept its thread with no trace. Now
    the deadline fails the attempt and, once the body has run on past a grace, the
    lost slot is logged, counted in ultimate_jobs_bodies_abandoned_total, on the
    worker's registry row and in readiness, until the body returns. A body that
    stops when its token is set is none of these."""
    from tests.acceptance.test_observability import free_port, scrape
    from tests.prom import value
    from tests.testapp.hardening_jobs import honours_timeout, ignores_timeout
    from ultimate_jobs.models import Worker

    port = free_port()
    worker = start_worker(
        "--concurrency", "2", "--metrics-port", str(port), LEASE=f"{LEASE:g}s"
    )
    polite = honours_timeout.enqueue(key="polite")
    answer = ignores_timeout.enqueue(key="slow", seconds=4 * LEASE)
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=[answer.id, polite.id], state="dead").count() == 2
        ),
        timeout=SETTLE,
        message="both attempts failed at their 1 s deadline",
    )
    assert set(
        Job.objects.filter(pk__in=[answer.id, polite.id]).values_list(
            "error_code", flat=True
        )
    ) == {"X_JOB_TIMEOUT"}
    row = wait_for(
        lambda: Worker.objects.filter(abandoned=1).first(),
        timeout=SETTLE,
        message="the registry row reporting the lost slot",
    )
    assert (row.slots, row.abandoned_jobs) == (2, [str(answer.id)])
    worker.wait_log("jobs.timeout.overrun")
    log = worker.log()
    assert log.count("jobs.timeout.overrun") == 1
    assert f"job_id={answer.id}" in log
    series = scrape(port)
    counted = {
        job.name: value(
            series,
            "ultimate_jobs_bodies_abandoned_total",
            queue="default",
            job=job.name,
        )
        for job in (ignores_timeout, honours_timeout)
    }
    assert counted == {ignores_timeout.name: 1.0, honours_timeout.name: 0.0}
    ready = client.get("/health/ready")
    assert ready.status_code == 200  # one usable slot left: the worker is live
    body = ready.json()
    assert body["workers"] == {"live": 1, "slots": 2, "abandoned_slots": 1}
    assert body["warnings"] == [
        f"worker {row.id!r}: 1 of 2 slot(s) held by bodies past their timeout"
    ]
    # When the body returns at last, the slot is back.
    wait_for(
        lambda: Worker.objects.filter(pk=row.id, abandoned=0).exists(),
        timeout=SETTLE,
        message="the slot back once the body returned",
    )
    worker.wait_log("jobs.timeout.abandoned")
    assert client.get("/health/ready").json()["warnings"] == []
