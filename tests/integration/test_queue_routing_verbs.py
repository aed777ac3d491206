"""Queues routed to database aliases (Q1) under the verbs that name a queue, a key or
no job at all: a pause is kept where the queue's claims read it, a bulk verb and
``cancel_by_key`` find their jobs on every alias (the archive included, Q2), runtime
schedules live on their job's queue's alias and fire there, and the dashboard's
numbers add every alias up."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.urls import reverse

from tests.integration.test_queue_routing_surfaces import register
from tests.testapp.jobs import noop
from ultimate_jobs import NO_TENANT, api, job, recur, unrecur
from ultimate_jobs.api.overview import overview
from ultimate_jobs.conf import load_settings, on_alias
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import Job, JobArchive, QueuePause, Schedule, Worker
from ultimate_jobs.scheduling import schedules
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.testing import declared, run_jobs
from ultimate_jobs.testing.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}
ALIASES = ("default", "jobs_b")


@pytest.fixture(autouse=True)
def routed(settings: Any) -> Iterator[None]:
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    yield
    for alias in ALIASES:  # Django's flush leaves the unmanaged archive alone
        with connections[alias].cursor() as cursor:
            cursor.execute("TRUNCATE ultimate_jobs_job_archive")


@pytest.fixture
def reports() -> Iterator[Any]:
    """A job whose declared queue lives on jobs_b."""

    @job(
        name="routed_report",
        idempotency_key=lambda p: p["key"],
        tenant=NO_TENANT,
        queue="routed",
    )
    def routed_report(run: Any, key: str) -> None:
        pass

    with declared(routed_report):
        yield routed_report


def dead(alias: str, key: str, queue: str) -> None:
    with on_alias(alias):
        JobFactory(job=noop, queue=queue, dead=True, idempotency_key=key)


def to_archive(alias: str) -> int:
    """Move every finished job of ``alias``, as its leader does after ARCHIVE_AFTER."""
    now = datetime.now(UTC) + timedelta(minutes=5)
    done = archive.move(
        DjangoDatabase(alias), after=60.0, batch=1000, max_batches=10, now=now
    )
    return done.moved


def test_a_pause_is_kept_on_the_alias_whose_claims_read_it():
    """Q1, L4: pausing a routed queue writes the pause on its alias, so that alias's
    claims skip it; resuming there lets them claim it again."""
    noop.using(queue="routed").enqueue(key="waiting")
    assert api.pause_queue("routed", by="ops") is True
    assert list(QueuePause.objects.using("jobs_b").values_list("queue", flat=True)) == [
        "routed"
    ]
    assert not QueuePause.objects.using("default").exists()
    assert api.paused_queues() == ["routed"]
    assert api.pause_queue("routed") is False  # paused already
    with on_alias("jobs_b"):
        assert run_jobs(queues=["routed"]) == []
    assert api.resume_queue("routed") is True
    with on_alias("jobs_b"):
        assert [a.outcome for a in run_jobs(queues=["routed"])] == ["completed"]
    assert api.paused_queues() == []


def test_a_bulk_retry_finds_dead_jobs_on_every_alias_and_in_the_archive():
    """Q1, Q2, P2: without a queue the bulk retry spans every alias, the jobs moved to
    the archive included; with one, only the alias that holds it."""
    dead("default", "here", "default")
    dead("jobs_b", "there-hot", "routed")
    dead("jobs_b", "there-old", "routed")
    assert to_archive("jobs_b") == 2
    dead("jobs_b", "there-new", "routed")
    answer = api.bulk("retry", state="dead", queue="routed", actor="ops")
    assert answer == {"affected": 3, "remaining": 0}
    assert not JobArchive.objects.using("jobs_b").exists()
    assert sorted(
        Job.objects.using("jobs_b").values_list("idempotency_key", "state")
    ) == [("there-hot", "ready"), ("there-new", "ready"), ("there-old", "ready")]
    assert Job.objects.using("default").get().state == "dead"  # not its queue
    assert api.bulk("retry", state="dead") == {"affected": 1, "remaining": 0}
    assert Job.objects.using("default").get().state == "ready"


def test_a_bulk_verb_bounds_every_alias_together(monkeypatch):
    """P2: the 1,000-per-call bound holds across aliases, and ``remaining`` counts
    what the aliases past the bound still hold, so calling again ends."""
    monkeypatch.setattr("ultimate_jobs.api.verbs.BULK_LIMIT", 2)
    for n in range(2):
        dead("default", f"here{n}", "default")
    for n in range(3):
        dead("jobs_b", f"there{n}", "routed")
    assert api.bulk("remove", state="dead") == {"affected": 2, "remaining": 3}
    assert api.bulk("remove", state="dead") == {"affected": 2, "remaining": 1}
    assert api.bulk("remove", state="dead") == {"affected": 1, "remaining": 0}
    assert not any(Job.objects.using(a).exists() for a in ALIASES)


def test_cancel_by_key_finds_the_holder_on_any_alias():
    """Q1, seed cancelByKey: the live job holding the key is cancelled wherever its
    queue lives; a key held on two aliases by two tenants needs the tenant."""
    there = noop.using(queue="routed").enqueue(key="nightly")
    assert api.cancel_by_key(noop, "nightly", actor="ops") == there.id
    assert Job.objects.using("jobs_b").get(pk=there.id).state == "cancelled"
    assert api.cancel_by_key(noop, "nightly") is None  # nothing live holds it now


def test_a_runtime_schedule_lives_and_fires_on_its_queues_alias(reports):
    """Q1, C6: ``recur`` keeps the schedule on the alias of its job's queue, whose
    leader fires it there; pause and resume act on it there; ``unrecur`` finds it."""
    recur(reports, {"key": "daily"}, cron="* * * * *", tz="UTC", schedule_key="rep")
    assert list(Schedule.objects.using("jobs_b").values_list("key", flat=True)) == [
        "rep"
    ]
    assert not Schedule.objects.using("default").exists()
    t0 = datetime(2025, 6, 2, 8, 0, 30, tzinfo=UTC)
    leaders = {
        alias: Scheduler(
            db=DjangoDatabase(alias),
            alias=alias,
            holder=alias,
            settings=load_settings({"QUEUES": ROUTED}),
        )
        for alias in ALIASES
    }
    for leader in leaders.values():
        leader.run_once(now=t0)
    later = t0 + timedelta(minutes=1)
    fired = {alias: len(s.run_once(now=later)) for alias, s in leaders.items()}
    assert fired == {"default": 0, "jobs_b": 1}
    assert list(Job.objects.using("jobs_b").values_list("name", "idempotency_key")) == [
        (reports.name, "daily@2025-06-02T08:01Z")
    ]
    assert not Job.objects.using("default").exists()
    assert schedules.pause_task("rep", by="ops") is True
    assert [t.paused for t in schedules.task_fires() if t.name == "rep"] == [True]
    assert schedules.resume_task("rep") is True
    assert unrecur("rep") is True
    assert not Schedule.objects.using("jobs_b").exists()


def test_the_admin_refuses_a_schedule_its_alias_would_not_fire(admin_client, reports):
    """Q1: the admin keeps schedules on DATABASE; a job of a routed queue is refused
    on its field, pointing at ``recur``, and nothing is written."""
    page = admin_client.post(
        reverse("admin:ultimate_jobs_schedule_add"),
        {
            "key": "rep",
            "job": reports.name,
            "input": '{"key": "daily"}',
            "cron": "0 9 * * *",
            "tz": "UTC",
            "catch_up": "skip",
            "max_catch_up": "10",
            "description": "",
        },
    )
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors
    assert "lives on database 'jobs_b'" in errors["job"][0]
    assert not any(Schedule.objects.using(a).exists() for a in ALIASES)


def test_the_dashboard_adds_every_alias_up_and_links_to_the_queues_alias(
    admin_client,
):
    """Q1, P7: each queue's numbers come from the alias that holds it, the queue
    names its database, and its links filter the job list on that database."""
    noop.enqueue(key="here")
    for n in range(2):
        noop.using(queue="routed").enqueue(key=f"there{n}")
    dead("jobs_b", "gone", "routed")
    api.pause_queue("routed", by="ops")
    queues = {q["queue"]: q for q in overview()["queues"]}
    assert queues["routed"]["database"] == "jobs_b"
    assert queues["routed"]["states"]["ready"] == 2
    assert queues["routed"]["states"]["dead"] == 1
    assert queues["routed"]["paused"]["by"] == "ops"
    assert queues["default"]["states"]["ready"] == 1
    stats = {q["queue"]: q for q in api.queue_stats()}
    assert (stats["routed"]["depth"], stats["routed"]["paused"]) == (2, True)
    page = admin_client.get(reverse("admin:ultimate_jobs_dashboard_changelist"))
    html = page.content.decode()
    assert "on jobs_b" in html
    assert "?queue=routed&amp;database=jobs_b&amp;state=dead" in html


def test_workers_of_every_alias_are_listed_and_drained():
    """Q1, W7: a worker registered only on the routed alias is listed and can be
    drained (its heartbeat reads the row of its own alias); one registered on both
    aliases is listed once, naming both."""
    register("jobs_b", "routed-only")
    register("default", "both")
    register("jobs_b", "both")
    listed = {w["id"]: w["databases"] for w in api.workers()}
    assert listed == {"both": ["default", "jobs_b"], "routed-only": ["jobs_b"]}
    assert api.drain_worker("routed-only", by="ops") is True
    row = Worker.objects.using("jobs_b").get(id="routed-only")
    assert (row.drain_requested_at is not None, row.drain_requested_by) == (True, "ops")
    assert api.drain_worker("gone") is False


def test_the_admin_lists_the_schedules_and_watermarks_of_an_alias(
    admin_client, reports
):
    """Q1, C6: the schedule and watermark lists take the database filter, so a
    schedule ``recur`` kept on the routed alias is listed there, with its state."""
    recur(reports, {"key": "daily"}, cron="0 9 * * *", tz="UTC", schedule_key="rep")
    schedules.pause_task("rep", by="ops")
    url = reverse("admin:ultimate_jobs_schedule_changelist")
    assert list(admin_client.get(url).context["cl"].result_list) == []
    listed = admin_client.get(url, {"database": "jobs_b"}).context["cl"]
    assert [row.key for row in listed.result_list] == ["rep"]
    assert "paused" in admin_client.get(url, {"database": "jobs_b"}).content.decode()
    marks = reverse("admin:ultimate_jobs_taskwatermark_changelist")
    page = admin_client.get(marks, {"database": "jobs_b"}).context["cl"]
    assert [row.key for row in page.result_list] == ["schedule:rep"]
