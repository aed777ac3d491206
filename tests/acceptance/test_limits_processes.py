"""Limits with real worker processes (L1-L4): a fleet cap across three workers, keyed
limits, a refused run, a SIGKILLed slot holder, a tenant burst under a per-tenant
budget, and a paused queue."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from django.db.models import Max

from tests.conftest import deadline, wait_for, wait_for_progress
from tests.testapp.jobs import (
    capped,
    exclusive,
    per_account,
    solo,
    stamped,
    tenant_work,
    touch,
)
from tests.testapp.models import Record
from ultimate_jobs import api
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.limits.slots import LeaseStore, job_lease_key
from ultimate_jobs.models import Job, Lease

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def spans(key):
    """(start, end) in ns of every run whose body stamped ``key``, by job id."""
    found: dict[object, dict[str, int]] = defaultdict(dict)
    for job_id, event in Record.objects.filter(key=key).values_list("job_id", "event"):
        kind, _, ns = event.partition(":")
        found[job_id][kind] = int(ns)
    return [(times["start"], times["end"]) for times in found.values()]


def most_at_once(intervals):
    """The largest number of intervals that overlap at one instant."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = most = 0
    for _, step in edges:  # at a tie, an end (-1) sorts before a start (+1)
        running += step
        most = max(most, running)
    return most


def done(name):
    return Job.objects.filter(name=name, state="done").count()


def events(key):
    return list(
        Record.objects.filter(key=key).order_by("id").values_list("event", flat=True)
    )


def assert_no_attempt_spent_waiting(name):
    """Every run was claimed once, unless an attempt of it failed and was retried
    (the shared test server can refuse a connection): waiting on a cap never counts
    an attempt."""
    spent = list(
        Job.objects.filter(name=name, attempt__gt=1, last_error="").values_list(
            "id", "attempt"
        )
    )
    assert spent == []


def test_three_workers_never_run_more_than_a_job_cap_at_once(start_worker):
    """L1, Done-when 1: concurrency=2 over 200 runs on three workers of 4 threads."""
    for _ in range(3):
        start_worker("--concurrency", "4")
    capped.enqueue_many([{"key": f"c{i}"} for i in range(200)])
    wait_for_progress(lambda: done(capped.name), 200, message="200 capped runs done")
    intervals = spans("capped")
    assert len(intervals) == 200
    assert all(start < end for start, end in intervals)
    assert most_at_once(intervals) == 2  # the cap, and reached
    assert_no_attempt_spent_waiting(capped.name)
    assert not LeaseStore(DjangoDatabase("default")).holders(job_lease_key(capped.name))


def test_a_keyed_limit_runs_one_per_key_and_the_keys_in_parallel(start_worker):
    """L2 wait, Done-when 2: limit=1 over 10 keys x 20 runs on three workers."""
    for _ in range(3):
        start_worker("--concurrency", "4")
    accounts = [f"acct-{n}" for n in range(10)]
    per_account.enqueue_many(
        [{"key": f"{a}-{i}", "account": a} for i in range(20) for a in accounts]
    )
    wait_for_progress(
        lambda: done(per_account.name), 200, message="200 keyed runs done"
    )
    everything = []
    for account in accounts:
        intervals = spans(account)
        assert len(intervals) == 20
        assert most_at_once(intervals) == 1, account
        everything += intervals
    assert most_at_once(everything) > 1  # different keys did run at once
    assert_no_attempt_spent_waiting(per_account.name)


def test_when_busy_fail_refuses_while_another_worker_holds_the_key(start_worker):
    """L2 fail, W9, Done-when 2: X_JOB_KEY_BUSY, outcome refused, row failed, body
    never run, on_settled told; the key is free again once the holder finishes."""
    first = start_worker("--concurrency", "2")
    holder = exclusive.enqueue(key="holder", account="acme")
    wait_for(lambda: events("holder") == ["started"])
    second = start_worker("--concurrency", "2")
    busy = exclusive.enqueue(key="busy", account="acme")
    wait_for(lambda: events("busy"), message="the refusal's on_settled record")
    assert events("busy") == ["settled:refused:X_JOB_KEY_BUSY"]  # no "started"
    job = Job.objects.get(pk=busy.id)
    assert (job.state, job.attempt, job.error_code, job.stop_reason) == (
        "failed",
        0,
        "X_JOB_KEY_BUSY",
        "refused",
    )
    assert "jobs.attempt.refused" in first.log() + second.log()
    Record.objects.create(key="holder", event="release")
    wait_for(lambda: Job.objects.get(pk=holder.id).state == "done")
    after = exclusive.enqueue(key="after", account="acme", seconds=0)
    wait_for(lambda: len(events("after")) == 3)
    assert Job.objects.get(pk=after.id).state == "done"
    assert events("after") == ["started", "finished", "settled:completed:"]


def test_a_sigkilled_holder_frees_its_slot_after_the_lease_ttl(start_worker):
    """L1, Done-when 3: no cleanup call; the slot row lapses with the run's lease and
    the next claim after that takes it over."""
    first = solo.enqueue(key="first")
    killed = start_worker("--concurrency", "2", LEASE="2s")
    wait_for(lambda: events("first") == ["started"])
    killed.kill()
    slot = Lease.objects.get(key=job_lease_key(solo.name))  # final: nobody renews it
    dead_token = Job.objects.get(pk=first.id).lease_owner
    assert dead_token is not None
    assert (slot.holder, slot.job_id) == (dead_token, first.id)
    waiting = solo.enqueue(key="waiting")
    survivor = start_worker("--concurrency", "2", LEASE="2s")
    taken = wait_for(
        lambda: (
            Lease.objects.filter(key=job_lease_key(solo.name))
            .exclude(holder=dead_token)
            .first()
        ),
        timeout=deadline(lease=2),
        message="the survivor to take the killed holder's slot",
    )
    assert taken.taken_from == dead_token  # the same row, taken over: never cleaned up
    run = Job.objects.get(pk=taken.job_id)
    assert (run.id, run.attempt) == (first.id, 2)  # the oldest run, rescued
    assert run.started_at is not None
    assert run.started_at >= slot.expires_at  # claimed only once the slot lapsed
    assert f":{survivor.pid}:" in run.worker_id
    wait_for(lambda: events("first") == ["started", "started"])
    Record.objects.create(key="first", event="release")
    Record.objects.create(key="waiting", event="release")
    wait_for(lambda: done(solo.name) == 2)
    assert events("first") == ["started", "started", "release", "finished"]
    assert events("waiting") == ["release", "started", "finished"]
    assert Job.objects.get(pk=waiting.id).attempt == 1


def test_a_tenant_burst_does_not_starve_another_tenant_under_a_per_tenant_budget(
    start_worker,
):
    """L3, Done-when 4: 5,000 runs of one tenant, then 50 of another, on two workers
    of 4 threads with --per-tenant 2: the second tenant's runs all finish while most
    of the burst still waits. Its wait (claimed - enqueued) is printed."""
    for _ in range(2):
        start_worker("--concurrency", "4", "--per-tenant", "2")
    tenant_work.enqueue_many([{"key": f"a{i}", "tenant": "burst"} for i in range(5000)])
    tenant_work.enqueue_many([{"key": f"b{i}", "tenant": "steady"} for i in range(50)])
    steady = Job.objects.filter(tenant_id="steady")
    wait_for_progress(
        lambda: steady.filter(state="done").count(),
        50,
        message="the steady tenant's 50 runs done",
    )
    last = steady.aggregate(last=Max("finished_at"))["last"]
    burst_done = Job.objects.filter(
        tenant_id="burst", state="done", finished_at__lte=last
    ).count()
    waits = sorted(
        (started - created).total_seconds()
        for started, created in steady.values_list("started_at", "created_at")
        if started is not None
    )
    assert len(waits) == 50
    p95 = waits[math.ceil(0.95 * len(waits)) - 1]
    print(
        f"\nL3 tenant burst: steady p95 wait {p95 * 1000:.0f} ms, median "
        f"{waits[len(waits) // 2] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms; "
        f"burst runs done by then: {burst_done} of 5000"
    )
    assert burst_done < 2500


def test_per_queue_and_global_budgets_bound_one_process(start_worker):
    """L3: --per-queue slow=1 and --global-limit 3 on a worker of 6 threads."""
    start_worker(
        "--concurrency", "6", "--queues", "slow,fast", "--allow-unknown-queues",
        "--per-queue", "slow=1",
        "--global-limit", "3",
    )  # fmt: skip
    stamped.using(queue="slow").enqueue_many(
        [{"key": f"s{i}", "group": "slow", "tenant": "t"} for i in range(8)]
    )
    stamped.using(queue="fast").enqueue_many(
        [{"key": f"f{i}", "group": "fast", "tenant": "t"} for i in range(16)]
    )
    wait_for(lambda: done(stamped.name) == 24)
    slow, fast = spans("slow"), spans("fast")
    assert (len(slow), len(fast)) == (8, 16)
    assert most_at_once(slow) == 1
    assert most_at_once(slow + fast) == 3


def test_a_tenant_rate_budget_spaces_the_starts_of_one_tenant(start_worker):
    """L3: --rate-per-tenant 4/s: a bucket of 4 starts, refilled at 4 per second, so
    any n starts of the tenant span at least (n - 4) / 4 seconds; another tenant is
    not held back."""
    start_worker("--concurrency", "8", "--rate-per-tenant", "4/s")
    stamped.enqueue_many(
        [
            {"key": f"r{i}", "group": "rated", "tenant": "t", "seconds": 0}
            for i in range(12)
        ]
        + [
            {"key": f"o{i}", "group": "other", "tenant": "u", "seconds": 0}
            for i in range(4)
        ]
    )
    wait_for(lambda: done(stamped.name) == 16)
    starts = sorted(  # claim times: when the worker spent the tokens
        started.timestamp()
        for started in Job.objects.filter(tenant_id="t").values_list(
            "started_at", flat=True
        )
        if started is not None
    )
    assert len(starts) == 12
    for i, first in enumerate(starts):
        for j in range(i + 7, len(starts)):
            # j - i + 1 starts within starts[j] - first: at most 4 + 4 per second of
            # it; 200 ms of slack for the time between the decision and the claim.
            assert starts[j] - first >= (j - i + 1 - 4) / 4 - 0.2, (i, j)
    assert len(spans("other")) == 4


@pytest.mark.needs_wake
def test_a_paused_queue_is_claimed_by_no_worker_and_resume_wakes_them(start_worker):
    """L4, N1, Done-when 5: both workers claim after the pause (their other queue's
    job runs) and skip the paused queue's older rows; the resume's announcement,
    not the 30 s poll, gets them run."""
    slow_poll = {
        "POLL_INTERVAL": "30s",
        "IDLE_POLL_MAX": "60s",
        "WOKEN_IDLE_POLL_MAX": "60s",
    }
    workers = [
        start_worker(
            "--roles",
            "worker",  # one channel: "jobs.wake.live" is the queue channel's
            "--concurrency",
            "2",
            "--queues",
            f"paused,side-{n}",
            "--allow-unknown-queues",
            **slow_poll,
        )
        for n in (1, 2)
    ]
    for worker in workers:
        worker.wait_log("jobs.wake.live")
    api.pause_queue("paused")
    held = [
        touch.using(queue="paused").enqueue(key=f"p{i}", tenant="t") for i in range(4)
    ]
    sides = [
        touch.using(queue=f"side-{n}").enqueue(key=f"side-{n}", tenant="t")
        for n in (1, 2)
    ]
    wait_for(lambda: all(Job.objects.get(pk=s.id).state == "done" for s in sides))
    assert {Record.objects.get(key=f"side-{n}").pid for n in (1, 2)} == {
        w.pid for w in workers
    }
    assert set(Job.objects.filter(queue="paused").values_list("state", "attempt")) == {
        ("ready", 0)
    }
    assert api.resume_queue("paused") is True
    wait_for(
        lambda: Job.objects.filter(queue="paused", state="done").count() == 4,
        timeout=25,  # under the 30 s poll: only the announcement can pass it
        message="the paused jobs run after the resume's announcement",
    )
    assert sorted(
        Record.objects.filter(key__startswith="p").values_list("key", flat=True)
    ) == [f"p{i}" for i in range(4)]
    assert {h.id for h in held} == set(
        Job.objects.filter(queue="paused", attempt=1).values_list("id", flat=True)
    )
