"""Counts that survive the move to the archive (issue 27, Q2, P7, M1): every reader
that counts dead (and other finished) jobs answers the same before and after the
leader moves them: the ``ultimate_jobs_queue_dead_jobs`` gauge and the new
``ultimate_jobs_queue_oldest_dead_seconds``, the dashboard, ``jobs stats``, the
dashboard's dead link (the jobs list filtered to ``dead``) and the bulk verbs. The
archive's counts follow a retry, a remove and a day drop out of the archive."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse

from tests.integration.test_archive_readers import (  # noqa: F401 - the fixture
    empty_archive,
    move_finished,
)
from tests.testapp.triage_jobs import settle_order
from ultimate_jobs import api
from ultimate_jobs.api import verbs
from ultimate_jobs.api.overview import overview
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import ArchiveCount, Job, JobArchive
from ultimate_jobs.observability.metrics import QueueCollector
from ultimate_jobs.observability.stats import queue_health
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.django_db

QUEUE = settle_order.definition.queue


def dead_letters(jobs: Any, count: int = 4) -> list[str]:
    answers = [
        settle_order.enqueue(key=f"d{n}", order=n, cause="missing")
        for n in range(count)
    ]
    assert {a.outcome for a in jobs.run()} == {"dead-lettered"}
    return sorted(str(a.id) for a in answers)


AT: list[Any] = []  # the instant the gauge is read at, fixed per test


def gauge() -> tuple[int, float]:
    """(dead, oldest_dead_seconds) of the queue, at a fixed instant."""
    if not AT:
        AT.append(
            max(
                at
                for table in (Job, JobArchive)
                for at in table.objects.values_list("finished_at", flat=True)
                if at is not None
            )
            + timedelta(hours=1)
        )
    found = queue_health(DjangoDatabase("default"), queues=[QUEUE], now=AT[0])
    return (found[0].dead, found[0].oldest_dead_seconds) if found else (0, 0.0)


@pytest.fixture(autouse=True)
def fresh_instant() -> None:
    AT.clear()


def collected() -> dict[str, float]:
    samples = {}
    for family in QueueCollector(database=DjangoDatabase("default")).collect():
        for sample in family.samples:
            if sample.labels.get("queue") == QUEUE:
                samples[sample.name] = sample.value
    return samples


def test_the_gauge_counts_a_dead_job_after_it_moved(jobs):
    dead_letters(jobs)
    before = gauge()
    assert before[0] == 4 and before[1] >= 3600
    assert collected()["ultimate_jobs_queue_dead_jobs"] == 4
    assert move_finished() == 4
    assert not Job.objects.exists()
    assert gauge() == before
    metrics = collected()
    assert metrics["ultimate_jobs_queue_dead_jobs"] == 4
    assert "ultimate_jobs_queue_oldest_dead_seconds" in metrics  # (now(): real time)


def test_the_dashboard_and_jobs_stats_agree_before_and_after_the_move(jobs, client):
    dead_letters(jobs)
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)

    def read() -> tuple[int, int, int, int]:
        [queue] = [q for q in overview()["queues"] if q["queue"] == QUEUE]
        [stats] = [q for q in api.queue_stats() if q["queue"] == QUEUE]
        out = io.StringIO()
        call_command("jobs", "stats", "--json", stdout=out)
        [cli] = [q for q in json.loads(out.getvalue()) if q["queue"] == QUEUE]
        page = client.get(reverse("admin:ultimate_jobs_dashboard_changelist"))
        html = page.content.decode()
        shown = html.count(f'href="{dead_url()}">{queue["states"]["dead"]}</a>')
        return (
            queue["states"]["dead"],
            stats["states"]["dead"],
            cli["states"]["dead"],
            shown,
        )

    assert read() == (4, 4, 4, 1)
    assert move_finished() == 4
    assert read() == (4, 4, 4, 1)


def dead_url() -> str:
    from django.utils.http import urlencode

    jobs = reverse("admin:ultimate_jobs_job_changelist")
    return f"{jobs}?{urlencode({'queue': QUEUE, 'state': 'dead'})}".replace(
        "&", "&amp;"
    )


def test_the_dead_link_lists_every_dead_job_before_and_after_the_move(jobs, client):
    ids = dead_letters(jobs)
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    url = reverse("admin:ultimate_jobs_job_changelist")

    def listed() -> list[str]:
        page = client.get(url, {"queue": QUEUE, "state": "dead"})
        assert page.status_code == 200
        return sorted(i for i in ids if i in page.content.decode())

    assert listed() == ids
    assert move_finished() == 4
    assert listed() == ids


def test_the_bulk_verbs_and_the_counts_agree_after_the_move(jobs, monkeypatch):
    dead_letters(jobs, count=5)
    assert move_finished() == 5
    monkeypatch.setattr(verbs, "BULK_LIMIT", 2)
    answer = api.bulk("retry", state="dead", queue=QUEUE, actor="ops")
    assert answer == {"affected": 2, "remaining": 3}
    assert gauge()[0] == 3  # the two retried left the archive's count
    victim = JobArchive.objects.filter(state="dead").first()
    assert victim is not None
    api.remove(victim.pk, actor="ops")
    assert gauge()[0] == 2
    archived = sum(
        ArchiveCount.objects.filter(state="dead").values_list("jobs", flat=True)
    )
    assert archived == JobArchive.objects.filter(state="dead").count()
    dead = gauge()[0]
    answer = api.bulk("retry", state="dead", queue=QUEUE, actor="ops")
    assert answer["affected"] + answer["remaining"] == dead
    assert gauge()[0] == answer["remaining"]


def test_the_counts_follow_a_day_drop(jobs):
    dead_letters(jobs, count=3)
    assert move_finished() == 3
    assert gauge()[0] == 3
    newest = JobArchive.objects.order_by("-finished_at").first()
    assert newest is not None and newest.finished_at is not None
    day = (newest.finished_at + timedelta(days=1)).date()
    [row] = DjangoDatabase("default").run(QUERIES["archive_drop_before"], day=day)
    assert row["dropped"] == 3
    assert not ArchiveCount.objects.exists()
    assert queue_health(DjangoDatabase("default"), queues=[QUEUE]) == []


def test_the_counts_follow_a_purge_by_row(jobs):
    dead_letters(jobs, count=3)
    assert move_finished() == 3
    newest = JobArchive.objects.order_by("-finished_at").first()
    assert newest is not None and newest.finished_at is not None
    [row] = DjangoDatabase("default").run(
        QUERIES["archive_purge_aged"],
        names=[settle_order.name],
        states=["dead"],
        keep_seconds=[0.0],
        batch=2,
        now=newest.finished_at + timedelta(hours=1),
    )
    assert row["deleted"] == 2
    assert gauge()[0] == 1 == JobArchive.objects.filter(state="dead").count()


def test_an_admin_action_acts_on_archived_rows_the_dead_link_lists(jobs, client):
    ids = dead_letters(jobs, count=2)
    assert move_finished() == 2
    assert gauge()[0] == 2
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=("view_job", "change_job"))
    )
    client.force_login(user)
    url = reverse("admin:ultimate_jobs_job_changelist")
    answer = client.post(
        f"{url}?state=dead",
        {"action": "retry_jobs", "_selected_action": ids, "index": 0},
    )
    assert answer.status_code == 302
    assert (
        sorted(
            str(pk)
            for pk in Job.objects.filter(state="ready").values_list("id", flat=True)
        )
        == ids
    )
    assert not JobArchive.objects.exists()
    assert gauge()[0] == 0
