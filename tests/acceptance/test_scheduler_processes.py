"""Real scheduler processes (C3, C4, B3): three compete, one fires each occurrence of
an every-minute task exactly once; SIGKILL the leader and a standby takes over within
one lease TTL, firing the occurrence that passed while nobody led, once; SIGTERM hands
the lease over at once.

Real time, 5-field cron: an occurrence is a minute. To keep the suite fast the task's
watermark is seeded a minute back, so the current minute is due the moment the three
processes elect a leader (a catch-up fire, made by one of three racing processes), and
the kill is timed two seconds before the next minute boundary, so that minute passes
with no leader. The test takes one to two minutes of real time at most, about 40 s on
average; no clock is faked in the processes.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from django.db import connection

from tests.conftest import WorkerProcess, deadline, wait_for
from ultimate_jobs.models import Job, LeaderLease
from ultimate_jobs.testing.factories import TaskWatermarkFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

TASK = "cronapp.every_minute"
TTL = 6  # seconds: the scheduler lease of these processes, renewed every 2 s


@pytest.fixture
def start_scheduler(worker_env, tmp_path):
    started: list[WorkerProcess] = []

    def start(command="jobs_scheduler", *args, **settings):
        env = worker_env(**settings)
        env["DJANGO_SETTINGS_MODULE"] = "tests.settings_scheduler"
        log = tmp_path / f"scheduler-{len(started)}.log"
        process = WorkerProcess(list(args), env, log, command=command)
        started.append(process)
        process.wait_log("jobs.scheduler.started")
        return process

    yield start
    for process in started:
        process.stop()


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def fired():
    """Every occurrence a job was inserted for, duplicates included, in order."""
    return sorted(
        datetime.fromisoformat(row["occurrence"])
        for row in Job.objects.filter(name="cronapp.minute_job").values_list(
            "input", flat=True
        )
    )


def holder_pid(holder):
    return int(holder.split(":")[-2])


def test_three_schedulers_fire_each_minute_once_and_a_standby_replaces_a_killed_leader(
    start_scheduler,
):
    minute = timedelta(minutes=1)
    now = db_now().replace(second=0, microsecond=0)
    TaskWatermarkFactory.create(name=TASK, last_occurrence=now - minute)
    settings = {"SCHEDULER_LEASE": f"{TTL}s", "SCHEDULER_TICK": "250ms"}
    processes = [
        start_scheduler("jobs_scheduler", **settings),
        start_scheduler("jobs_scheduler", **settings),
        start_scheduler("jobs_worker", "--roles", "scheduler", **settings),
    ]
    first = wait_for(
        fired, timeout=deadline(lease=TTL), message="the due minute to fire"
    )[0]

    # Kill the leader two seconds before the next minute: it passes with no leader.
    boundary = (db_now() + timedelta(seconds=5)).replace(
        second=0, microsecond=0
    ) + minute
    wait_for(
        lambda: db_now() >= boundary - timedelta(seconds=2),
        timeout=70,  # a clock wait: the instant is at most 65 s away
        interval=0.05,
        message="two seconds before the minute",
    )
    lease = LeaderLease.objects.get()
    [leader] = [p for p in processes if p.pid == holder_pid(lease.holder)]
    killed_at = db_now()
    leader.kill()
    wait_for(
        lambda: boundary in fired(),
        timeout=deadline(lease=TTL),
        message="the takeover fire",
    )
    taken = LeaderLease.objects.get()
    assert taken.holder != lease.holder
    assert taken.term > lease.term
    # Within one lease TTL of the kill (plus the standby's reaction on a busy box).
    assert taken.acquired_at - killed_at <= timedelta(seconds=TTL + 1.5)
    survivors = [p for p in processes if p is not leader]
    for process in survivors:
        process.terminate()
    for process in survivors:
        assert process.wait() == 0

    # Every minute from the first fire to the boundary, each exactly once.
    count = int((boundary - first) / minute) + 1
    assert fired() == [first + minute * i for i in range(count)]
    assert first >= now  # the seeded minute at the latest; nothing older
    late = Job.objects.get(
        name="cronapp.minute_job", input__occurrence=boundary.isoformat()
    )
    assert late.enqueued_by.startswith("scheduler ")
    assert holder_pid(late.enqueued_by.split(" ", 1)[1]) == holder_pid(taken.holder)


def test_sigterm_hands_the_lease_to_a_standby_at_once(start_scheduler):
    first = start_scheduler("jobs_worker")  # the default roles include the scheduler
    first.wait_log("jobs.worker.started")
    wait_for(
        lambda: LeaderLease.objects.filter(holder__contains=f":{first.pid}:").exists(),
        message="the first process to lead",
    )
    second = start_scheduler("jobs_scheduler")
    first.terminate()
    assert first.wait() == 0
    first.wait_log("jobs.scheduler.released")
    # The lease TTL is 30 s, renewed every 10 s: a takeover within 15 s of the exit
    # is the release, never the expiry.
    wait_for(
        lambda: LeaderLease.objects.filter(holder__contains=f":{second.pid}:").exists(),
        timeout=15,
        message="the standby to lead",
    )
    second.wait_log("jobs.scheduler.leading")


def test_default_roles_keep_one_leader_with_the_poll_carrying_the_lease(
    start_scheduler,
):
    """Two `jobs_worker` processes with the default roles (worker, scheduler, relay):
    the leader's lease renews in its worker's idle poll (issue 26, N2) or, failing
    that, on its own, never lapsing; SIGKILL the leader and the other takes over
    within one TTL; no occurrence fires twice (C3, C4)."""
    minute = timedelta(minutes=1)
    TaskWatermarkFactory.create(
        name=TASK, last_occurrence=db_now().replace(second=0, microsecond=0) - minute
    )
    settings = {
        "SCHEDULER_LEASE": f"{TTL}s",
        "SCHEDULER_TICK": "250ms",
        "WOKEN_IDLE_POLL_MAX": "1s",  # the poll ceiling: the carry's grace is 1 s
        "IDLE_POLL_MAX": "1s",
    }
    processes = [start_scheduler("jobs_worker", **settings) for _ in range(2)]
    wait_for(fired, timeout=deadline(lease=TTL), message="the due minute to fire")
    lease = LeaderLease.objects.get()
    renewals = {lease.renewed_at}
    # Two TTLs idle: the row is renewed at least every third of the TTL (a poll's
    # carry or the leader's own) and never changes hands.
    until = db_now() + timedelta(seconds=2 * TTL)
    while db_now() < until:
        row = LeaderLease.objects.get()
        assert (row.holder, row.term) == (lease.holder, lease.term)
        assert row.expires_at > db_now()
        renewals.add(row.renewed_at)
        time.sleep(0.2)  # sampling the row, not waiting for it
    assert len(renewals) >= 5
    [leader] = [p for p in processes if p.pid == holder_pid(lease.holder)]
    killed_at = db_now()
    leader.kill()
    taken = wait_for(
        lambda: LeaderLease.objects.filter(term__gt=lease.term).first(),
        timeout=deadline(lease=TTL),
        message="the takeover",
    )
    assert taken.holder != lease.holder
    assert taken.acquired_at - killed_at <= timedelta(seconds=TTL + 1.5)
    [survivor] = [p for p in processes if p is not leader]
    survivor.terminate()
    assert survivor.wait() == 0
    occurrences = fired()
    assert occurrences and len(set(occurrences)) == len(occurrences)
