"""Retention per job (F6), applied by the app's purge (F3): days, last, both, False,
the defaults, the RETENTION setting, rows of names no job declares; steps and leases
go with their jobs; a job is visible to `jobs show` while it is retained."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from ultimate_jobs import NO_TENANT, job
from ultimate_jobs.jobs import PURGE, purge_tables
from ultimate_jobs.models import Job, JobStep, Lease
from ultimate_jobs.retention.jobs import JobRetention, effective_retention
from ultimate_jobs.testing.factories import (
    JobFactory,
    LeaseFactory,
    OutboxMessageFactory,
)

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def declare(name, retention):
    def body(run):
        """Never run: the tests write its finished rows directly."""

    return job(
        name=name, idempotency_key=lambda p: name, tenant=NO_TENANT, retention=retention
    )(body)


def finished(jobs, name, state, *ages):
    """Finished rows of ``name`` in ``state``, one per age, keyed by the age."""
    now = jobs.now()
    for age in ages:
        JobFactory.create(
            name=name,
            **{state: True},
            idempotency_key=label(age),
            finished_at=now - age,
        )


def label(age):
    hours = age / HOUR
    return f"{hours:g}h"


def kept(name, state):
    rows = Job.objects.filter(name=name, state=state).order_by("finished_at")
    return list(rows.values_list("idempotency_key", flat=True))


def purge_pass(jobs):
    answer = purge_tables.enqueue()
    attempts = jobs.run()
    assert [(a.name, a.outcome) for a in attempts] == [(PURGE, "completed")]
    return answer


def test_days_last_both_and_false_per_job_and_state(jobs, clean_registry):
    declare("ret.days", {"done": {"days": 3}})
    declare("ret.last", {"done": {"last": 2}})
    declare("ret.both", {"dead": {"last": 2, "days": 5}})
    declare("ret.none", {"done": False, "cancelled": False})
    finished(jobs, "ret.days", "done", 2 * DAY, 4 * DAY)
    finished(jobs, "ret.last", "done", HOUR, 2 * DAY, 10 * DAY, 40 * DAY)
    finished(jobs, "ret.both", "dead", 1 * DAY, 2 * DAY, 3 * DAY, 4 * DAY, 6 * DAY)
    finished(jobs, "ret.none", "done", timedelta(minutes=1))
    finished(jobs, "ret.none", "cancelled", timedelta(seconds=1))
    finished(jobs, "ret.none", "dead", 29 * DAY, 31 * DAY)  # not declared: default
    purge_pass(jobs)
    assert kept("ret.days", "done") == ["48h"]
    # last alone: the newest two, whatever their age (the default days rule is replaced)
    assert kept("ret.last", "done") == ["48h", "1h"]
    # both: a row goes when it breaks either
    assert kept("ret.both", "dead") == ["48h", "24h"]
    # False: nothing finished before the pass is kept, whatever its age
    assert kept("ret.none", "done") == []
    assert kept("ret.none", "cancelled") == []
    assert kept("ret.none", "dead") == ["696h"]


def test_the_defaults_per_state_for_a_job_that_declares_none(jobs):
    """done 1 day, cancelled 7 days, failed and dead 30 days."""
    name = "testapp.noop"
    finished(jobs, name, "done", 12 * HOUR, 25 * HOUR)
    finished(jobs, name, "cancelled", 6 * DAY, 8 * DAY)
    finished(jobs, name, "failed", 29 * DAY, 31 * DAY)
    finished(jobs, name, "dead", 29 * DAY, 31 * DAY)
    purge_pass(jobs)
    assert kept(name, "done") == ["12h"]
    assert kept(name, "cancelled") == ["144h"]
    assert kept(name, "failed") == ["696h"]
    assert kept(name, "dead") == ["696h"]


def test_rows_of_a_name_no_job_declares_keep_the_defaults(jobs):
    """A rename does not delete the old name's history: its rows age out under the
    defaults, like any job's."""
    name = "billing.charge_v1"  # renamed since; nothing declares it any more
    finished(jobs, name, "done", 12 * HOUR, 2 * DAY)
    finished(jobs, name, "dead", 29 * DAY, 31 * DAY)
    assert effective_retention(name) == {
        "done": {"days": 1.0},
        "failed": {"days": 30.0},
        "dead": {"days": 30.0},
        "cancelled": {"days": 7.0},
    }
    purge_pass(jobs)
    assert kept(name, "done") == ["12h"]
    assert kept(name, "dead") == ["696h"]


def test_the_retention_setting_overrides_the_defaults_but_not_a_declaration(
    jobs, settings, clean_registry
):
    settings.ULTIMATE_JOBS = {
        "RETENTION": {"done": {"days": 3}, "dead": {"last": 1}, "cancelled": False}
    }
    declare("ret.declared", {"done": {"days": 1}})
    finished(jobs, "testapp.noop", "done", 2 * DAY, 4 * DAY)
    finished(jobs, "testapp.noop", "dead", 40 * DAY, 50 * DAY)
    finished(jobs, "testapp.noop", "cancelled", HOUR)
    finished(jobs, "renamed.job", "done", 2 * DAY, 4 * DAY)
    finished(jobs, "ret.declared", "done", 12 * HOUR, 2 * DAY)
    assert effective_retention("ret.declared")["done"] == {"days": 1.0}
    assert effective_retention("ret.declared")["cancelled"] is False
    purge_pass(jobs)
    assert kept("testapp.noop", "done") == ["48h"]
    assert kept("testapp.noop", "dead") == ["960h"]  # the newest one, 40 days old
    assert kept("testapp.noop", "cancelled") == []
    assert kept("renamed.job", "done") == ["48h"]
    assert kept("ret.declared", "done") == ["12h"]


def test_live_jobs_are_never_purged(jobs, clean_registry):
    declare("ret.live", {"done": False, "dead": False, "failed": False})
    ancient = jobs.now() - 400 * DAY
    for state in ("ready", "delayed", "suspended", "running"):
        JobFactory.create(
            name="ret.live",
            queue="parked",  # served by no one here: the rows stay as they are
            **{state: True},
            idempotency_key=state,
            run_at=ancient,
            created_at=ancient,
            finished_at=ancient,  # nonsense for a live row: still not a reason
        )
    purge_pass(jobs)
    assert Job.objects.filter(name="ret.live").count() == 4


def test_a_job_whose_outbox_row_is_unpublished_is_kept(jobs, clean_registry):
    """O2: the relay may publish that id again; without the row the job would run
    twice."""
    declare("ret.staged", {"done": False})
    now = jobs.now()
    pending, published = uuid.uuid4(), uuid.uuid4()
    for job_id, published_at in ((pending, None), (published, now - HOUR)):
        JobFactory.create(
            id=job_id,
            name="ret.staged",
            done=True,
            idempotency_key=str(job_id),
            finished_at=now - DAY,
        )
        OutboxMessageFactory.create(
            id=job_id,
            name="ret.staged",
            idempotency_key=str(job_id),
            run_at=now - 2 * DAY,
            staged_tx=1,
            published_at=published_at,
        )
    # Straight to the target: the testing runner would relay the pending row first.
    assert JobRetention().purge_expired(jobs.now()) == 1
    assert list(Job.objects.filter(name="ret.staged").values_list("id", flat=True)) == [
        pending
    ]


def test_the_last_rule_keeps_the_newest_in_bounded_batches(
    jobs, settings, clean_registry
):
    settings.ULTIMATE_JOBS = {"PURGE_BATCH": 2, "PURGE_MAX_BATCHES": 3}
    declare("ret.last", {"done": {"last": 3}})
    finished(jobs, "ret.last", "done", *(n * HOUR for n in range(1, 10)))
    # 3 statements: the days rules of the other states (nothing to delete), then the
    # last rule twice, 2 rows each, oldest first.
    purge_pass(jobs)
    assert kept("ret.last", "done") == ["5h", "4h", "3h", "2h", "1h"]
    purge_pass(jobs)
    assert kept("ret.last", "done") == ["3h", "2h", "1h"]


def test_steps_and_leases_go_with_their_jobs(jobs):
    """S8, L1: deleting a job deletes its steps (ON DELETE CASCADE in the database)
    and the concurrency lease rows that still name it."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT confdeltype FROM pg_constraint
             WHERE conrelid = 'ultimate_jobs_step'::regclass
               AND confrelid = 'ultimate_jobs_job'::regclass AND contype = 'f'
            """
        )
        assert cursor.fetchall() == [("c",)]  # c = CASCADE
    now = jobs.now()
    old = JobFactory.create(
        name="testapp.noop",
        done=True,
        idempotency_key="old",
        finished_at=now - 2 * DAY,
        steps=["a", "b"],
    )
    new = JobFactory.create(
        name="testapp.noop",
        done=True,
        idempotency_key="new",
        finished_at=now - HOUR,
        steps=["a", "b"],
    )
    for owner in (old, new):
        LeaseFactory.create(
            key=f"job:{owner.idempotency_key}",
            slot=0,
            name="testapp.noop",
            holder=uuid.uuid4(),
            job_id=owner.id,
            acquired_at=now - HOUR,
            expires_at=now + DAY,  # not lapsed: only the job's purge removes it
        )
    purge_pass(jobs)
    assert not Job.objects.filter(pk=old.pk).exists()
    assert JobStep.objects.filter(job_id=old.pk).count() == 0
    assert JobStep.objects.filter(job_id=new.pk).count() == 2
    assert list(Lease.objects.values_list("job_id", flat=True)) == [new.pk]


def test_a_job_is_visible_to_jobs_show_and_the_admin_while_it_is_retained(
    jobs, admin_client
):
    answer = purge_tables.enqueue()  # any job: the purge itself is one
    jobs.run()
    detail = reverse("admin:ultimate_jobs_job_change", args=[answer.id])
    out = io.StringIO()
    call_command("jobs", "show", str(answer.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["state"] == "done"
    jobs.travel(hours=23)
    purge_pass(jobs)
    call_command("jobs", "show", str(answer.id), "--json", stdout=io.StringIO())
    assert admin_client.get(detail).status_code == 200
    jobs.travel(hours=2)  # past the default day
    purge_pass(jobs)
    with pytest.raises(CommandError, match="X_JOB_NOT_FOUND"):
        call_command("jobs", "show", str(answer.id), "--json", stdout=io.StringIO())
    assert admin_client.get(detail).status_code == 302  # "does not exist" message
