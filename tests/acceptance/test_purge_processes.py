"""The app's purge in a real worker process (F3, F6): a fire of the hourly task puts
the purge on the queue, a `jobs_worker` runs it on its own autocommit connections,
and the expired rows are gone while the retained ones stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from tests.conftest import wait_for
from ultimate_jobs import trigger
from ultimate_jobs.jobs import PURGE, purge_hourly
from ultimate_jobs.models import Event, Job, JobStep
from ultimate_jobs.testing.factories import EventFactory, JobFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_a_worker_runs_the_app_purge_fired_by_its_task(start_worker):
    now = db_now()
    expired = EventFactory.create(name="e", expires_at=now - timedelta(minutes=1))
    live = EventFactory.create(name="e", expires_at=now + timedelta(days=1))
    old = JobFactory.create(
        name="testapp.noop",
        done=True,
        idempotency_key="old",
        finished_at=now - timedelta(days=2),
        steps=["a"],
    )
    recent = JobFactory.create(
        name="testapp.noop",
        done=True,
        idempotency_key="recent",
        finished_at=now - timedelta(hours=1),
    )
    start_worker("--roles", "worker")
    [fired] = trigger(purge_hourly)
    wait_for(
        lambda: Job.objects.filter(pk=fired.id, state="done").exists(),
        message="the purge pass to complete",
    )
    assert list(Event.objects.values_list("id", flat=True)) == [live.id]
    assert not Event.objects.filter(pk=expired.id).exists()
    assert list(
        Job.objects.filter(name="testapp.noop").values_list("id", flat=True)
    ) == [recent.id]
    assert not JobStep.objects.filter(job_id=old.id).exists()
    steps = dict(JobStep.objects.filter(job_id=fired.id).values_list("name", "output"))
    assert (steps["purge:events"], steps["purge:jobs"]) == (1, 1)
    assert Job.objects.get(pk=fired.id).name == PURGE
