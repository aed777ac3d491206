"""Per-job counters (P5): moved in the statement that settles the row, folded by tier."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command

from tests.testapp.jobs import dropped, flaky, noop, terminal
from ultimate_jobs.models import JobCounter
from ultimate_jobs.observability import counters

pytestmark = pytest.mark.django_db


def totals(name, jobs):
    [row] = counters.totals(since="1h", name=name, now=jobs.now())
    return {k: row[k] for k in ("done", "retried", "failed", "dead")}


def test_each_ending_moves_its_counter_with_the_row(jobs):
    noop.enqueue_many([{"key": str(i)} for i in range(3)])
    flaky.enqueue(key="f", fail_times=1)
    terminal.enqueue(key="t")
    dropped.enqueue(key="d")
    jobs.run()
    jobs.travel(minutes=1)
    jobs.run()
    jobs.travel(minutes=1)
    jobs.run()
    assert totals("testapp.noop", jobs) == {
        "done": 3,
        "retried": 0,
        "failed": 0,
        "dead": 0,
    }
    assert totals("testapp.flaky", jobs) == {
        "done": 1,
        "retried": 1,
        "failed": 0,
        "dead": 0,
    }
    assert totals("testapp.terminal", jobs) == {
        "done": 0,
        "retried": 0,
        "failed": 0,
        "dead": 1,
    }
    assert totals("testapp.dropped", jobs) == {
        "done": 0,
        "retried": 2,
        "failed": 1,
        "dead": 0,
    }
    assert set(JobCounter.objects.values_list("tier", flat=True)) == {60}


def test_a_fenced_out_settle_counts_nothing(jobs):
    from ultimate_jobs.db import DjangoDatabase
    from ultimate_jobs.runtime.settle import Settler
    from ultimate_jobs.sql.rows import Fence

    noop.enqueue(key="x")
    [attempt] = jobs.run()
    row: Fence = {"id": attempt.job_id, "lease_owner": uuid.uuid4()}  # not its token
    assert Settler(DjangoDatabase("default")).complete(row) is False
    assert totals("testapp.noop", jobs)["done"] == 1


def test_rollup_folds_minutes_into_fives_then_hours_and_drops_the_oldest(jobs):
    start = jobs.now()
    noop.enqueue(key="a")
    jobs.run()
    [minute] = JobCounter.objects.all()
    assert minute.tier == 60
    # 25 hours later the minute bucket is folded into a 5-minute bucket, counts kept.
    assert counters.rollup(now=start + timedelta(hours=25)) == {
        "minutes_folded": 1,
        "fives_folded": 0,
        "hours_expired": 0,
    }
    [five] = JobCounter.objects.all()
    assert (five.tier, five.done) == (300, 1)
    assert five.bucket.minute % 5 == 0
    counters.rollup(now=start + timedelta(days=8))
    [hour] = JobCounter.objects.all()
    assert (hour.tier, hour.done, hour.bucket.minute) == (3600, 1, 0)
    counters.rollup(now=start + timedelta(days=31))
    assert JobCounter.objects.count() == 0
    assert counters.rollup(now=start + timedelta(days=31)) == {
        "minutes_folded": 0,
        "fives_folded": 0,
        "hours_expired": 0,
    }


def test_the_command_answers_totals_with_mean_durations(jobs):
    noop.enqueue_many([{"key": str(i)} for i in range(2)])
    jobs.run()
    out = io.StringIO()
    call_command("jobs", "counters", "--since", "1h", "--json", stdout=out)
    [row] = [r for r in json.loads(out.getvalue()) if r["name"] == "testapp.noop"]
    assert (row["done"], row["dead"]) == (2, 0)
    assert row["mean_duration"] is not None and row["mean_duration"] >= 0
