"""Queues routed to database aliases (Q1) on the operator surfaces: readiness and the
queue gauges read every alias; the ``jobs`` CLI reads and acts on the alias
``--database`` names."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.testapp.jobs import noop, touch
from ultimate_jobs.health import readiness
from ultimate_jobs.models import Job, Worker
from ultimate_jobs.observability.metrics import QueueCollector

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}


@pytest.fixture(autouse=True)
def routed(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}


def register(alias: str, worker_id: str) -> None:
    now = timezone.now()
    Worker.objects.using(alias).create(
        id=worker_id,
        host="h",
        pid=1,
        started_at=now,
        slots=4,
        heartbeat_at=now,
        expires_at=now + timedelta(minutes=1),
    )


def test_readiness_judges_the_queues_of_every_alias_and_counts_a_worker_once():
    """Q1, M3: a backlog on the routed alias fails readiness; a worker serving both
    aliases is registered on each under one id and counts once."""
    touch.using(queue="routed").enqueue(key="waiting", tenant="acme")
    register("default", "both")
    register("jobs_b", "both")
    answer = readiness(max_depth=0, min_workers=2)
    assert answer.problems == (
        "queue 'routed': depth 1 > max_depth 0",
        "1 live worker(s) < min_workers 2",
    )
    assert [q.queue for q in answer.queues] == ["routed"]


def test_the_queue_gauges_read_every_alias():
    """Q1, M1: each queue's gauges come from its own alias; a known queue reads 0
    once, from the alias it lives on."""
    touch.enqueue(key="here", tenant="acme")
    touch.using(queue="routed").enqueue_many(
        [{"key": f"there{i}", "tenant": "acme"} for i in range(2)]
    )
    [depth, *_] = QueueCollector().collect()
    samples = {s.labels["queue"]: s.value for s in depth.samples}
    assert samples == {"default": 1, "routed": 2}


def jobs_json(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("jobs", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_jobs_command_reads_and_acts_on_the_alias_it_is_given():
    """Q1, P3: ``jobs --database <alias>`` lists and moves the jobs of that alias;
    an alias without jobs tables is refused, naming it."""
    here = noop.enqueue(key="here")
    there = noop.using(queue="routed").enqueue(key="there")
    assert [j["id"] for j in jobs_json("list")["jobs"]] == [str(here.id)]
    listed = jobs_json("--database", "jobs_b", "list")["jobs"]
    assert [(j["id"], j["queue"]) for j in listed] == [(str(there.id), "routed")]
    jobs_json("--database", "jobs_b", "cancel", str(there.id))
    assert Job.objects.using("jobs_b").get().state == "cancelled"
    assert Job.objects.using("default").get().state == "ready"
    with pytest.raises(CommandError, match=r"X_CONFIGURATION: --database='jobs'"):
        call_command("jobs", "--database", "jobs", "list", stdout=io.StringIO())
