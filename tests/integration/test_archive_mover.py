"""The archive mover (Q2): finished jobs leave the hot table for their day of the archive,
with their steps, attempts and run logs; live jobs never move; a mover killed in the
middle of a batch loses nothing; two movers never move a row twice; a day's partition
is made ahead, and on demand for a day the leader never made."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection

from tests.conftest import conninfo, wait_for
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.maintenance import archive
from ultimate_jobs.maintenance.host import Maintenance
from ultimate_jobs.maintenance.rollup import ROLLUP_EVERY
from ultimate_jobs.management.roles import ROLES
from ultimate_jobs.models import Attempt, Job, JobArchive, JobStep, RunLog
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.testing.factories import JobFactory, JobStepFactory

MINUTE = timedelta(minutes=1)
NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def empty_archive(django_db_blocker: Any) -> Iterator[None]:
    """Django's flush leaves unmanaged tables alone: each test starts and ends with
    an empty archive."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def move(now: datetime = NOW, batch: int = 100) -> archive.Pass:
    return archive.move(
        DjangoDatabase("default"), after=60.0, batch=batch, max_batches=10, now=now
    )


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class AS child"
            " ON child.oid = inhrelid"
            " WHERE inhparent = 'ultimate_jobs_job_archive'::regclass ORDER BY 1"
        )
        return [name for (name,) in cursor.fetchall()]


def where(job_id: Any) -> tuple[int, int]:
    """(rows in the hot table, rows in the archive) for one id."""
    return (
        Job.objects.filter(pk=job_id).count(),
        JobArchive.objects.filter(pk=job_id).count(),
    )


@pytest.mark.django_db
def test_a_finished_job_moves_with_its_steps_attempts_and_logs_and_live_ones_stay():
    old = JobFactory.create(done=True, finished_at=NOW - 2 * MINUTE, attempt=2)
    step = JobStepFactory.create(job=old, name="fetch", output={"rows": 3})
    Attempt.objects.create(job=old, run_id=old.run_id, attempt=1, outcome="retried")
    RunLog.objects.create(job=old, run_id=old.run_id, attempt=2, entries=[{"m": 1}])
    recent = JobFactory.create(done=True, finished_at=NOW - 30 * timedelta(seconds=1))
    live = [
        JobFactory.create(ready=True),
        JobFactory.create(running=True),
        JobFactory.create(delayed=True),
        JobFactory.create(suspended=True),
    ]
    dead = JobFactory.create(dead=True, finished_at=NOW - 3 * MINUTE)

    done = move()

    assert done.moved == 2
    assert done.full is False
    assert where(old.id) == (0, 1)
    assert where(dead.id) == (0, 1)
    assert where(recent.id) == (1, 0)  # within ARCHIVE_AFTER: still hot
    assert [where(row.id) for row in live] == [(1, 0)] * 4
    moved = JobArchive.objects.get(pk=old.id)
    assert (moved.name, moved.state, moved.attempt, moved.finished_at) == (
        old.name,
        "done",
        2,
        old.finished_at,
    )
    assert [s["name"] for s in moved.trail["steps"]] == ["fetch"]
    assert moved.trail["steps"][0]["output"] == {"rows": 3}
    assert moved.trail["steps"][0]["id"] == step.id
    assert [a["outcome"] for a in moved.trail["attempts"]] == ["retried"]
    assert [log["entries"] for log in moved.trail["logs"]] == [[{"m": 1}]]
    # The hot copies went with the row (the cascade), nothing is left behind.
    assert JobStep.objects.filter(job_id=old.id).count() == 0
    assert Attempt.objects.filter(job_id=old.id).count() == 0
    assert RunLog.objects.filter(job_id=old.id).count() == 0
    assert move().moved == 0  # a second pass finds nothing more


@pytest.mark.django_db
def test_a_job_the_relay_may_still_publish_stays_hot():
    """O2: an outbox row not yet marked published keeps its job in the hot table."""
    from ultimate_jobs.testing.factories import OutboxMessageFactory

    staged = OutboxMessageFactory.create(claimed=True)
    JobFactory.create(id=staged.id, done=True, finished_at=NOW - 5 * MINUTE)
    assert move().moved == 0
    assert where(staged.id) == (1, 0)


@pytest.mark.django_db
def test_days_are_made_ahead_and_on_demand_for_a_day_no_leader_made():
    long_ago = NOW - timedelta(days=20)
    JobFactory.create(done=True, finished_at=long_ago)
    done = move()
    days = partitions()
    first = f"ultimate_jobs_job_archive_p{long_ago:%Y%m%d}"
    last = (
        f"ultimate_jobs_job_archive_p{NOW + timedelta(days=archive.DAYS_AHEAD):%Y%m%d}"
    )
    assert first in days and last in days
    assert done.moved == 1 and done.made >= 28
    assert move().made == 0  # idempotent: every day exists


@pytest.mark.django_db
def test_a_full_pass_says_more_is_due_and_batches_stop_at_the_cap():
    for minutes in range(2, 9):
        JobFactory.create(done=True, finished_at=NOW - minutes * MINUTE)
    done = archive.move(
        DjangoDatabase("default"), after=60.0, batch=2, max_batches=2, now=NOW
    )
    assert (done.moved, done.full) == (4, True)
    # Oldest first: the four oldest went.
    assert Job.objects.filter(state="done").count() == 3
    oldest = Job.objects.order_by("finished_at").values_list("finished_at", flat=True)
    assert oldest[0] == NOW - 4 * MINUTE


@pytest.mark.django_db
def test_the_scheduler_leader_moves_finished_jobs_on_its_cadence():
    old = JobFactory.create(done=True, finished_at=NOW - 2 * MINUTE)
    leader = Scheduler(
        db=DjangoDatabase("default"), holder="a", settings=load_settings({})
    )
    standby = Scheduler(
        db=DjangoDatabase("default"), holder="b", settings=load_settings({})
    )
    leader.run_once(now=NOW)
    assert where(old.id) == (0, 1)
    later = JobFactory.create(done=True, finished_at=NOW - 2 * MINUTE)
    standby.run_once(now=NOW + timedelta(seconds=10))  # not the leader: no move
    assert where(later.id) == (1, 0)
    leader.run_once(now=NOW + timedelta(seconds=1))  # before MOVE_EVERY: no pass
    assert where(later.id) == (1, 0)
    leader.run_once(now=NOW + archive.MOVE_EVERY)
    assert where(later.id) == (0, 1)
    # A pass that moves nothing sets the idle cadence (C8): the next waits for it.
    idle_at = NOW + 2 * archive.MOVE_EVERY
    leader.run_once(now=idle_at)
    last = JobFactory.create(done=True, finished_at=idle_at - 2 * MINUTE)
    leader.run_once(now=idle_at + archive.MOVE_EVERY)
    assert where(last.id) == (1, 0)
    leader.run_once(now=idle_at + archive.MOVE_IDLE_EVERY)
    assert where(last.id) == (0, 1)


def test_the_idle_cadence_is_five_times_archive_after_within_bounds():
    assert archive.idle_every(60.0) == archive.MOVE_IDLE_EVERY  # the default: 5 min
    assert archive.idle_every(5.0) == timedelta(seconds=25)
    assert archive.idle_every(0.1) == archive.MOVE_EVERY
    assert archive.idle_every(3600.0) == archive.MOVE_IDLE_EVERY


def _direct() -> psycopg.Connection[Any]:
    return psycopg.connect(autocommit=True, **conninfo(connection.settings_dict))


def _move_params(batch: int) -> dict[str, Any]:
    return {
        "now": NOW,
        "after_seconds": 60.0,
        "covered": NOW - timedelta(days=1),
        "batch": batch,
    }


@pytest.mark.django_db(transaction=True)
def test_a_mover_killed_in_the_middle_of_a_batch_leaves_every_job_hot():
    ids = [
        JobFactory.create(done=True, finished_at=NOW - m * MINUTE).id
        for m in range(2, 7)
    ]
    archive.ensure_days(DjangoDatabase("default"), NOW, NOW)
    day = f"ultimate_jobs_job_archive_p{NOW:%Y%m%d}"
    blocker, mover, killer = _direct(), _direct(), _direct()
    try:
        blocker.execute("BEGIN")
        blocker.execute(f"LOCK TABLE {day} IN ACCESS EXCLUSIVE MODE")
        pid = mover.info.backend_pid
        failure: list[BaseException] = []

        def run() -> None:
            try:
                mover.execute(QUERIES["archive_move"].text, _move_params(100))
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        wait_for(
            lambda: killer.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s"
                " AND wait_event_type = 'Lock'",
                (pid,),
            ).fetchone(),
            message="the mover to wait on the locked day, its deletes done",
        )
        killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        thread.join()
        blocker.execute("ROLLBACK")
        assert failure and isinstance(failure[0], psycopg.OperationalError)
    finally:
        for conn in (blocker, mover, killer):
            conn.close()
    assert [where(job_id) for job_id in ids] == [(1, 0)] * 5
    assert move().moved == 5  # the next pass moves them all, once
    assert [where(job_id) for job_id in ids] == [(0, 1)] * 5


@pytest.mark.django_db(transaction=True)
def test_two_movers_never_take_the_same_row():
    ids = [
        JobFactory.create(done=True, finished_at=NOW - m * MINUTE).id
        for m in range(2, 7)
    ]
    archive.ensure_days(DjangoDatabase("default"), NOW, NOW)
    first, second = _direct(), _direct()
    try:
        second.execute("SET statement_timeout = '60s'")
        first.execute("BEGIN")
        [(one,)] = first.execute(
            QUERIES["archive_move"].text, _move_params(2)
        ).fetchall()
        # The first mover's two rows are locked in its open transaction: the second
        # skips them instead of waiting, and moves the other three.
        [(two,)] = second.execute(
            QUERIES["archive_move"].text, _move_params(100)
        ).fetchall()
        first.execute("COMMIT")
    finally:
        first.close()
        second.close()
    assert (one, two) == (2, 3)
    assert [where(job_id) for job_id in ids] == [(0, 1)] * 5
    assert JobArchive.objects.count() == 5


@pytest.mark.django_db
def test_a_maintenance_host_of_its_own_leads_its_role_and_runs_the_chores():
    """Issue 25 item 6: the chores run outside the cron loop, on a host that holds the
    maintenance role's lease (``jobs_worker --roles worker,maintenance``): one host
    leads and moves, another waits; the roll-up comes ROLLUP_EVERY after it began."""
    old = JobFactory.create(done=True, finished_at=NOW - 2 * MINUTE)
    settings = load_settings({"SCHEDULER_LEASE": "1h"})  # no lapse between rounds
    leader = Maintenance(db=DjangoDatabase("default"), holder="m1", settings=settings)
    standby = Maintenance(db=DjangoDatabase("default"), holder="m2", settings=settings)
    assert leader.run_once(now=NOW) == ["archive"]
    assert where(old.id) == (0, 1)
    later = JobFactory.create(done=True, finished_at=NOW - 2 * MINUTE)
    assert standby.run_once(now=NOW + archive.MOVE_EVERY) == []  # not the leader
    assert where(later.id) == (1, 0)
    assert leader.run_once(now=NOW + archive.MOVE_EVERY) == ["archive"]
    assert where(later.id) == (0, 1)
    assert leader.run_once(now=NOW + ROLLUP_EVERY) == ["archive", "rollup"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT role, holder FROM ultimate_jobs_leader_lease ORDER BY role"
        )
        assert cursor.fetchall() == [("maintenance", "m1")]
    assert "maintenance" in ROLES
