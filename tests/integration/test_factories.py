"""ultimate_jobs.testing.factories (X1, issue 16): rows in every state, built through the
real models, that the real code reads as the worker's own: a ready job runs, a running
one is not claimed until its lease lapses (W5), a dead one is requeued and its steps
replay (P2, S1), a staged outbox row is relayed (O2), a live worker counts (W8)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta

import pytest
from django.db import connection

from tests.conftest import REPO
from tests.testapp.durable_jobs import events, onboard
from tests.testapp.jobs import noop, terminal, touch
from ultimate_jobs import InvalidCron, api
from ultimate_jobs.health import Thresholds, check
from ultimate_jobs.models import Job, JobStep, OutboxMessage, Schedule
from ultimate_jobs.testing.factories import (
    EventFactory,
    JobFactory,
    JobStepFactory,
    LeaseFactory,
    OutboxMessageFactory,
    ScheduleFactory,
    TaskWatermarkFactory,
    WorkerFactory,
)

pytestmark = pytest.mark.django_db

LEASE = timedelta(seconds=30)  # the LEASE default the test settings keep


def span(start: datetime | None, end: datetime | None) -> timedelta:
    assert start is not None, "no start"
    assert end is not None, "no end"
    return end - start


def test_a_ready_job_of_a_declared_job_takes_its_declaration_and_runs(jobs):
    row = JobFactory.create(job=terminal, input={"key": "f-ready"})
    assert (row.state, row.name, row.queue, row.max_attempts, row.attempt) == (
        "ready",
        terminal.name,
        "default",
        5,  # Retry(attempts=5)
        0,
    )
    bare = JobFactory.create(job=touch.name, input={"key": "f-bare"})
    assert (bare.name, bare.max_attempts) == (touch.name, 1)
    outcomes = {a.job_id: str(a.outcome) for a in jobs.run()}
    assert outcomes == {row.id: "dead-lettered", bare.id: "completed"}


def test_a_running_job_holds_a_live_lease_until_it_lapses(jobs):
    row = JobFactory.create(job=touch, running=True, input={"key": "f-run"})
    assert (row.state, row.attempt, row.worker_id) == (
        "running",
        1,
        "factory-host:1:factory",
    )
    assert isinstance(row.lease_owner, uuid.UUID)
    assert span(row.started_at, row.lease_expires_at) == LEASE
    assert jobs.run() == []  # the lease is live: no one else claims it (W2)
    jobs.travel(LEASE + timedelta(seconds=1))
    [attempt] = jobs.run()  # lapsed: claimed again (W5), its second attempt
    assert (attempt.job_id, str(attempt.outcome)) == (row.id, "completed")
    assert Job.objects.get(pk=row.pk).attempt == 2


def test_a_dead_job_has_spent_its_attempts_and_keeps_a_traceback():
    row = JobFactory.create(job=terminal, dead=True, error="SMTP 550")
    assert (row.state, row.attempt, row.max_attempts, row.stop_reason) == (
        "dead",
        5,
        5,
        "attempts-exhausted",
    )
    assert row.last_error.startswith("builtins.RuntimeError: SMTP 550\n\n")
    assert "Traceback (most recent call last):" in row.last_error
    assert span(row.started_at, row.finished_at) == timedelta(seconds=1)
    assert JobFactory.create(dead=True).attempt == 3  # a bare name: three attempts
    failed = JobFactory.create(failed=True)
    assert (failed.state, failed.attempt, failed.stop_reason) == (
        "failed",
        1,
        "terminal",
    )


def test_a_dead_job_with_a_step_is_requeued_and_the_step_replays(jobs):
    """P2, S1: the factory's step rows are the ones the runtime replays."""
    row = JobFactory.create(
        job=onboard,
        dead=True,
        input={"key": "f-acme", "email_failures": 0},
        idempotency_key="onboard:f-acme",
        steps=["provision"],
        steps__output={"org": "f-acme", "plan": "gold"},
    )
    [step] = JobStep.objects.filter(job=row)
    assert (step.kind, step.status, step.attempt) == ("step", "done", 5)
    api.retry(row.id)
    [attempt] = jobs.run()
    assert str(attempt.outcome) == "suspended"  # run.sleep("3d") after the e-mail
    # provision replayed its stored output: it did not run, and the e-mail read it.
    assert events("f-acme") == ["welcome:gold"]


def test_a_done_job_with_steps():
    row = JobFactory.create(done=True, steps=2)
    steps = JobStep.objects.filter(job=row).order_by("name")
    assert [(s.name, s.status, s.attempt) for s in steps] == [
        ("step-0", "done", 1),
        ("step-1", "done", 1),
    ]
    assert (row.state, row.attempt) == ("done", 1)
    assert span(row.started_at, row.finished_at) == timedelta(seconds=1)


def test_the_other_job_states():
    assert JobFactory.create(delayed=True).state == "delayed"
    suspended = JobFactory.create(suspended=True)
    assert (suspended.state, suspended.attempt) == ("suspended", 1)
    assert span(suspended.started_at, suspended.run_at) > timedelta(0)
    cancelled = JobFactory.create(cancelled=True)
    assert (cancelled.state, cancelled.stop_reason) == ("cancelled", "cancelled")


def test_step_traits_for_waits():
    sleeping = JobStepFactory.create(sleeping=True)
    assert (sleeping.kind, sleeping.status, sleeping.finished_at) == (
        "sleep",
        "waiting",
        None,
    )
    assert sleeping.job.state == "running"
    waiting = JobStepFactory.create(
        waiting=True, event="order.paid", match={"order": "o-1"}
    )
    assert (waiting.kind, waiting.status, waiting.event) == (
        "event",
        "waiting",
        "order.paid",
    )
    assert JobStepFactory.create(timed_out=True).status == "timed_out"


def test_a_staged_outbox_row_is_relayed_under_its_own_id(jobs):
    """O2: the relay publishes the row as a job with the row's id."""
    staged = OutboxMessageFactory.create(job=noop, input={"key": "f-outbox"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        assert staged.staged_tx == cursor.fetchone()[0]  # this test's transaction
    published = OutboxMessageFactory.create(published=True)
    assert jobs.relay() == 1
    assert Job.objects.get(pk=staged.id).name == noop.name
    assert not Job.objects.filter(pk=published.id).exists()
    assert OutboxMessage.objects.get(pk=staged.id).published_at is not None


def test_a_schedule_is_checked_on_save_like_recur():
    schedule = ScheduleFactory.create(
        job=noop, input={"key": "f-sched"}, cron="0 3 * * *"
    )
    assert (schedule.job, schedule.tz) == (noop.name, "UTC")
    assert ScheduleFactory.create().job == "ultimate_jobs.purge"
    with pytest.raises(InvalidCron, match="minute: 61 is out of range"):
        ScheduleFactory.create(cron="61 * * * *")
    assert Schedule.objects.count() == 2


def test_a_live_worker_counts_for_readiness_and_an_expired_one_does_not():
    WorkerFactory.create(expired=True)
    assert check(Thresholds.of(min_workers=1)).ready is False
    worker = WorkerFactory.create()
    assert worker.expires_at - worker.heartbeat_at == LEASE
    assert worker.id == f"factory-host:{worker.pid}:factory"
    assert check(Thresholds.of(min_workers=1)).ready is True


def test_events_leases_and_watermarks():
    assert (
        EventFactory.create().expires_at > EventFactory.create(expired=True).expires_at
    )
    lease = LeaseFactory.create(name="app.job")
    assert (lease.key, lease.slot, lease.expires_at - lease.acquired_at) == (
        "job:app.job",
        0,
        LEASE,
    )
    mark = TaskWatermarkFactory.create(name="app.task")
    assert (mark.key, mark.last_occurrence.second) == ("task:app.task", 0)


def test_without_factory_boy_the_import_says_what_to_install():
    """The module ships with the package; factory-boy stays a test dependency."""
    code = (
        "import sys; sys.modules['factory'] = None\n"
        "import django; django.setup()\n"
        "import ultimate_jobs.testing\n"
        "try:\n"
        "    import ultimate_jobs.testing.factories\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == (
        "ultimate_jobs.testing.factories needs factory-boy, a test dependency: "
        "pip install 'factory-boy>=3.3'\n"
    )
