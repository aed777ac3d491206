"""Queues routed to database aliases (Q1): the scheduler leads per alias under that
alias's own leader lease and fires each occurrence's rows into their own alias once;
the app's purge trims every alias's tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.test_purge import seed_tables
from tests.testapp.jobs import noop
from ultimate_jobs import task, task_registry
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import (
    Job,
    LeaderLease,
    Lease,
    OutboxMessage,
    OutboxReceipt,
    TaskWatermark,
    Worker,
)
from ultimate_jobs.retention.housekeeping import app_targets
from ultimate_jobs.scheduling.scheduler import Scheduler

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"]),
    pytest.mark.usefixtures("without_app_purge"),
]

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}
T0 = datetime(2025, 6, 2, 8, 0, 30, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def both_queues():
    """A task whose every occurrence has a job on each alias."""

    @task(cron="* * * * *", tz="UTC", name="both")
    def both(occurrence):
        return [
            (noop, {"key": "here"}),
            (noop.using(queue="routed"), {"key": "there"}),
        ]

    yield both
    task_registry.unregister("both")


def scheduler(alias: str, holder: str) -> Scheduler:
    return Scheduler(
        db=DjangoDatabase(alias),
        alias=alias,
        holder=holder,
        settings=load_settings({"QUEUES": ROUTED}),
    )


def keys(alias: str) -> list[str]:
    return sorted(
        Job.objects.using(alias)
        .filter(name=noop.name)
        .values_list("idempotency_key", flat=True)
    )


def test_each_alias_has_its_own_leader_and_fires_its_own_rows_once(both_queues):
    """Q1, C3, C4: a leader lease per alias; each leader fires every occurrence once,
    writing only the rows of the queues on its alias, with its own watermark."""
    a, b = scheduler("default", "a"), scheduler("jobs_b", "b")
    b_rival = scheduler("jobs_b", "b-rival")
    for s in (a, b, b_rival):
        s.run_once(now=T0)  # leadership begins; watermarks start at the clock
    assert [(lease.holder) for lease in LeaderLease.objects.using("default")] == ["a"]
    assert [(lease.holder) for lease in LeaderLease.objects.using("jobs_b")] == ["b"]
    later = T0 + timedelta(minutes=1)
    fired = [len(s.run_once(now=later)) for s in (a, b, b_rival)]
    assert fired == [1, 1, 0]
    assert [len(s.run_once(now=later)) for s in (a, b)] == [0, 0]  # once per alias
    assert keys("default") == ["here@2025-06-02T08:01Z"]
    assert keys("jobs_b") == ["there@2025-06-02T08:01Z"]
    assert Job.objects.using("jobs_b").get().queue == "routed"
    for alias in ("default", "jobs_b"):
        mark = TaskWatermark.objects.using(alias).get(key="task:both")
        assert mark.last_occurrence == datetime(2025, 6, 2, 8, 1, tzinfo=UTC)


def test_the_app_purge_trims_every_aliass_tables(settings):
    """Q1, F3: the app's purge has the same targets on each routed alias (named
    <target>@<alias>, its events included), and the delivery receipts of every alias."""
    now = datetime.now(UTC)
    for alias in ("default", "jobs_b"):
        settings.ULTIMATE_JOBS = {"DATABASE": alias}
        seed_tables(now)
    for alias, age in (("default", 8 * DAY), ("jobs_b", 8 * DAY)):
        receipts = OutboxReceipt.objects.using(alias)
        receipts.create(id="00000000-0000-0000-0000-000000000001")
        receipts.create(id="00000000-0000-0000-0000-000000000002")
        receipts.filter(id="00000000-0000-0000-0000-000000000001").update(
            received_at=now - age
        )
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    targets = app_targets()
    assert [t.name for t in targets] == [
        "events",
        "outbox",
        "receipts",
        "jobs",
        "workers",
        "leases",
        "events@jobs_b",
        "outbox@jobs_b",
        "jobs@jobs_b",
        "workers@jobs_b",
        "leases@jobs_b",
        "receipts@jobs_b",
    ]
    removed = {t.name: t.purge_expired(now) for t in targets}
    assert removed == {
        "events": 1,
        "outbox": 1,
        "receipts": 1,
        "jobs": 1,
        "workers": 1,
        "leases": 1,
        "events@jobs_b": 1,
        "outbox@jobs_b": 1,
        "jobs@jobs_b": 1,
        "workers@jobs_b": 1,
        "leases@jobs_b": 1,
        "receipts@jobs_b": 1,
    }
    for alias in ("default", "jobs_b"):
        outbox = OutboxMessage.objects.using(alias).values_list("idempotency_key")
        assert sorted(k for (k,) in outbox) == ["pending", "recent"]
        assert keys(alias) == ["recent"]
        assert list(Worker.objects.using(alias).values_list("id", flat=True)) == [
            "live"
        ]
        assert list(Lease.objects.using(alias).values_list("slot", flat=True)) == [1]
        assert OutboxReceipt.objects.using(alias).count() == 1
