"""Retention of the archive (F6, Q2): a day no rule keeps a row of is dropped whole; a
shorter rule still deletes rows of the days left; a ``last``-only rule keeps the days
of the rows it keeps; the app's purge does all of it in its ``jobs`` target."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ultimate_jobs import NO_TENANT, job
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.jobs import PURGE, purge_tables
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import Job, JobArchive
from ultimate_jobs.retention.jobs import JobRetention
from ultimate_jobs.testing.factories import JobFactory

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def empty_archive(django_db_blocker: Any) -> Iterator[None]:
    """Django's flush leaves unmanaged tables alone; old days are dropped too."""

    def clear() -> None:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE ultimate_jobs_job_archive")

    clear()
    yield
    clear()


def days() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class AS child"
            " ON child.oid = inhrelid"
            " WHERE inhparent = 'ultimate_jobs_job_archive'::regclass"
        )
        return {name.removeprefix("ultimate_jobs_job_archive_p") for (name,) in cursor}


def day(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y%m%d}"


def moved(now: datetime, **rows: tuple[str, timedelta]) -> dict[str, Any]:
    """Finished rows keyed by label, moved to the archive as the leader would."""
    made = {
        label: JobFactory.create(
            name=name,
            done=True,
            state="done" if "done" in label else "failed",
            idempotency_key=label,
            finished_at=now - age,
        ).id
        for label, (name, age) in rows.items()
    }
    archive.move(
        DjangoDatabase("default"), after=60.0, batch=1000, max_batches=10, now=now
    )
    assert Job.objects.filter(pk__in=made.values()).count() == 0
    return made


def left() -> list[str]:
    return sorted(JobArchive.objects.values_list("idempotency_key", flat=True))


def test_days_past_every_rule_are_dropped_whole_and_shorter_rules_delete_rows():
    now = timezone.now()
    moved(
        now,
        failed_40d=("hist.plain", 40 * DAY),
        failed_31d=("hist.plain", 31 * DAY + timedelta(hours=1)),
        failed_10d=("hist.plain", 10 * DAY),
        done_10d=(
            "hist.plain",
            10 * DAY,
        ),  # done is kept 1 day by default: a row delete
        done_1h=("hist.plain", timedelta(hours=1)),
    )
    held = days()
    assert {day(now - 40 * DAY), day(now - 10 * DAY), day(now + 7 * DAY)} <= held
    removed = JobRetention().purge_expired(now)
    assert removed == 3
    assert left() == ["done_1h", "failed_10d"]
    after = days()
    # The longest rule is 30 days (failed, dead): every day before that one is gone,
    # whole; that day, the kept ones and the days made ahead stay.
    horizon = (now - 30 * DAY).astimezone(UTC).date()
    assert all(datetime.strptime(name, "%Y%m%d").date() >= horizon for name in after), (
        sorted(after)
    )
    assert {day(now - 10 * DAY), day(now), day(now + 7 * DAY)} <= after
    assert day(now - 40 * DAY) not in after


def test_a_last_only_rule_keeps_the_days_of_the_rows_it_keeps(clean_registry):
    job(
        name="hist.last",
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retention={"done": {"last": 2}},
    )(lambda run: None)
    now = timezone.now()
    moved(
        now,
        done_60d=("hist.last", 60 * DAY),
        done_50d=("hist.last", 50 * DAY),
        done_45d=("hist.last", 45 * DAY),
        failed_45d=("hist.plain", 45 * DAY),  # 30 days: past its rule, goes by row
    )
    removed = JobRetention().purge_expired(now)
    assert left() == ["done_45d", "done_50d"]
    assert removed == 2
    held = days()
    assert day(now - 50 * DAY) in held and day(now - 45 * DAY) in held
    assert day(now - 60 * DAY) not in held


def test_the_app_purge_trims_the_archive_in_its_jobs_step(jobs):
    now = jobs.now()
    moved(
        now, done_3d=("hist.plain", 3 * DAY), done_1h=("hist.plain", timedelta(hours=1))
    )
    purge_tables.enqueue()
    attempts = jobs.run()
    assert [(a.name, a.outcome) for a in attempts] == [(PURGE, "completed")]
    assert left() == ["done_1h"]
