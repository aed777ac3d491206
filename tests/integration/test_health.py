"""Readiness (M3): /health/ready answers 200 or 503 against depth and lag thresholds
and the worker registry; the same check as a Django system check."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.core import checks
from django.utils import timezone

from tests.testapp.jobs import touch
from ultimate_jobs import sql
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.health import CHECK_ID, readiness, register_check

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.testapp.urls")]


def register_worker(
    worker_id="w-1", lease_seconds=30.0, now=None, slots=1, abandoned=()
):
    DjangoDatabase("default").run(
        sql.QUERIES["worker_beat"],
        id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=timezone.now(),
        queues=["default"],
        names=None,
        slots=slots,
        in_flight=list(abandoned),
        abandoned=len(abandoned),
        abandoned_jobs=list(abandoned),
        lease_seconds=lease_seconds,
        now=now,
    )


def three_waiting_since(minutes):
    touch.using(
        queue="q-health", run_at=timezone.now() - timedelta(minutes=minutes)
    ).enqueue_many([{"key": f"h{i}", "tenant": "t"} for i in range(3)])


def test_depth_at_the_limit_is_ready_and_one_over_is_not(client):
    three_waiting_since(minutes=2)
    response = client.get("/ready/depth-3")
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True
    assert body["queues"]["q-health"]["depth"] == 3
    assert body["problems"] == []
    response = client.get("/ready/depth-2")
    assert response.status_code == 503
    assert response.json()["problems"] == ["queue 'q-health': depth 3 > max_depth 2"]
    assert response["Cache-Control"].startswith("max-age=0")


def test_lag_under_the_limit_is_ready_and_over_it_is_not(client):
    three_waiting_since(minutes=3)
    response = client.get("/ready/lag-5m")
    assert response.status_code == 200
    assert 180 <= response.json()["queues"]["q-health"]["oldest_ready_seconds"] < 300
    response = client.get("/ready/lag-1m")
    assert response.status_code == 503
    [problem] = response.json()["problems"]
    assert problem.startswith("queue 'q-health': oldest due job waited 1")
    assert problem.endswith("> max_lag 60s")


def test_ready_needs_a_live_worker_and_a_stopped_one_is_not_ready(client):
    # The project's /health/ready: max_depth=1000, max_lag=5m, one live worker.
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["problems"] == ["0 live worker(s) < min_workers 1"]
    register_worker("w-live")
    response = client.get("/health/ready")
    assert response.status_code == 200
    assert response.json()["workers"] == {"live": 1, "slots": 1, "abandoned_slots": 0}
    # Its registry row expired: the worker stopped beating.
    register_worker("w-live", now=timezone.now() - timedelta(minutes=5))
    assert client.get("/health/ready").status_code == 503


def test_readiness_judges_only_the_queues_asked_for(client):
    three_waiting_since(minutes=1)
    touch.using(queue="parked").enqueue(key="p", tenant="t")
    register_worker()
    assert not readiness(max_depth=0, queues=["parked"]).ready
    assert readiness(max_depth=0, queues=["elsewhere"]).ready
    answer = readiness(max_depth=2)
    assert [q.queue for q in answer.queues] == ["parked", "q-health"]
    assert answer.problems == ("queue 'q-health': depth 3 > max_depth 2",)
    assert client.get("/ready/parked").status_code == 503


def test_readiness_as_a_system_check_for_the_database():
    check = register_check(max_depth=2, min_workers=0)
    try:
        assert checks.run_checks(tags=["ultimate_jobs"]) == []  # no database asked
        assert checks.run_checks(databases=["default"], tags=["ultimate_jobs"]) == []
        three_waiting_since(minutes=1)
        [warning] = checks.run_checks(databases=["default"], tags=["ultimate_jobs"])
        assert warning.id == CHECK_ID
        assert warning.msg == "jobs not ready: queue 'q-health': depth 3 > max_depth 2"
    finally:
        checks.registry.registry.registered_checks.discard(check)


def test_a_worker_whose_every_slot_a_body_past_its_timeout_holds_is_not_live(client):
    """Lost capacity (issue 14): slots held by bodies that ignore their timeout are
    reported, and a worker with none usable does not count as live."""
    import uuid

    held = [uuid.uuid4()]
    register_worker("w-lost", slots=1, abandoned=held)
    response = client.get("/health/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["workers"] == {"live": 0, "slots": 1, "abandoned_slots": 1}
    assert body["problems"] == ["0 live worker(s) < min_workers 1"]
    assert body["warnings"] == [
        "worker 'w-lost': 1 of 1 slot(s) held by bodies past their timeout"
    ]
    register_worker("w-lost", slots=2, abandoned=held)
    assert client.get("/health/ready").status_code == 200
