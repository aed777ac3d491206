"""Queues routed to database aliases (Q1) with real processes: one worker serving
queues on two aliases runs each job once within one slot budget, and a relay
SIGKILLed at each step of a delivery into another alias publishes every staged job
exactly once."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, connections, transaction

from tests.conftest import WorkerProcess, conninfo, deadline, wait_for
from tests.testapp.jobs import hold, touch
from tests.testapp.models import Record
from ultimate_jobs.models import Job, OutboxMessage, OutboxReceipt

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"]),
    pytest.mark.processes,
    pytest.mark.needs_session,  # addresses the processes' server sessions by name
]

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}
QUEUES = json.dumps(ROUTED)  # ULTIMATE_JOBS_QUEUES: the mapping form, as JSON


@pytest.fixture(autouse=True)
def routed(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}


@pytest.fixture
def start_relay(
    worker_env: Callable[..., dict[str, str]], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``manage.py jobs_relay`` processes; killed at the end of the test."""
    started: list[WorkerProcess] = []

    def start(*args: str, **settings: str) -> WorkerProcess:
        log = tmp_path / f"relay-{len(started)}.log"
        relay = WorkerProcess(
            list(args), worker_env(**settings), log, command="jobs_relay"
        )
        started.append(relay)
        relay.wait_log("jobs.relay.started")
        return relay

    yield start
    for relay in started:
        relay.stop()


@pytest.fixture
def lock_table() -> Iterator[Callable[[str, str], Callable[[], None]]]:
    """``lock_table(alias, table)`` holds a SHARE lock on a table of that alias's
    database, so a relay's write to it blocks; answers the function that releases it
    (a rollback). Every lock is released at the end anyway."""
    held: list[psycopg.Connection[Any]] = []

    def lock(alias: str, table: str) -> Callable[[], None]:
        conn = psycopg.connect(**conninfo(connections[alias].settings_dict))
        conn.execute(f"LOCK TABLE {table} IN SHARE MODE")
        held.append(conn)
        return conn.rollback

    yield lock
    for conn in held:
        conn.rollback()
        conn.close()


def sessions(application_name: str, *, waiting_on: str = "") -> int:
    """How many server sessions (of any database) the named process holds; with
    ``waiting_on``, only those waiting on a lock in a statement that mentions it."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s"
    params: list[str] = [application_name + "%"]
    if waiting_on:
        sql += " AND wait_event_type = 'Lock' AND query LIKE %s"
        params.append(f"%{waiting_on}%")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def end_sessions(application_name: str) -> None:
    """A SIGKILLed client's server sessions wait on their locks until terminated: end
    them, so the statement they were blocked in never runs."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name LIKE %s",
            [application_name + "%"],
        )
    wait_for(
        lambda: sessions(application_name) == 0,
        message=f"the server sessions of {application_name!r} to end",
    )


def routed_jobs() -> int:
    return Job.objects.using("jobs_b").count()


def published() -> int:
    return OutboxMessage.objects.exclude(published_at=None).count()


# -- the worker ------------------------------------------------------------------------


def test_a_worker_serving_queues_on_two_aliases_runs_each_job_once(start_worker):
    """Q1: one process, one claim loop per alias; every job of both aliases runs once,
    in that process, and each alias's rows stay in its own tables."""
    here = [touch.enqueue(key=f"a{i}", tenant="acme").id for i in range(15)]
    there = [
        touch.using(queue="routed").enqueue(key=f"b{i}", tenant="acme").id
        for i in range(15)
    ]
    worker = start_worker(
        "--roles", "worker", "--concurrency", "3", QUEUES=QUEUES, LEASE="5s"
    )
    wait_for(
        lambda: (
            Job.objects.filter(state="done").count() == 15
            and Job.objects.using("jobs_b").filter(state="done").count() == 15
        ),
        timeout=deadline(lease=5, work=30 * 0.5),
        message="the 15 jobs of each alias done",
    )
    assert set(Job.objects.values_list("id", flat=True)) == set(here)
    assert set(Job.objects.using("jobs_b").values_list("id", flat=True)) == set(there)
    ran = list(Record.objects.filter(event="ran").values_list("job_id", "pid"))
    assert sorted(str(job_id) for job_id, _ in ran) == sorted(map(str, here + there))
    assert {pid for _, pid in ran} == {worker.pid}
    log = worker.log()
    assert log.count("jobs.worker.started") == 2
    assert "alias=default" in log and "alias=jobs_b" in log


def test_the_claim_loops_of_two_aliases_share_one_slot_budget(start_worker):
    """Q1: --concurrency 2 is the process's budget, not each alias's: with two held
    jobs running (whichever aliases they came from), nothing else starts through two
    lease renewals, although both aliases have ready work; released, the rest run."""
    keys = ["a1", "a2"]
    for key in keys:
        hold.enqueue(key=key, seconds=120)
    for key in ["b1", "b2"]:
        hold.using(queue="routed").enqueue(key=key, seconds=120)
    start_worker("--roles", "worker", "--concurrency", "2", QUEUES=QUEUES, LEASE="3s")

    def started() -> int:
        return Record.objects.filter(event="started").count()

    wait_for(lambda: started() >= 2, message="two held jobs started")
    running = [
        *Job.objects.filter(state="running"),
        *Job.objects.using("jobs_b").filter(state="running"),
    ]
    assert len(running) == 2
    renewed = {job.id: job.lease_expires_at for job in running}

    def renewed_twice() -> bool:
        for job in running:
            alias = job._state.db
            now = Job.objects.using(alias).get(pk=job.id).lease_expires_at
            before = renewed[job.id]
            if now is None or before is None or (now - before).total_seconds() < 2:
                return False
        return True

    wait_for(
        renewed_twice,
        timeout=deadline(lease=3),
        message="the running jobs' leases renewed twice (a heartbeat is 1 s)",
    )
    assert started() == 2
    ready = Job.objects.filter(state="ready").count()
    ready += Job.objects.using("jobs_b").filter(state="ready").count()
    assert ready == 2
    for key in ["a1", "a2", "b1", "b2"]:
        Record.objects.create(key=key, event="release")
    wait_for(
        lambda: (
            Job.objects.filter(state="done").count() == 2
            and Job.objects.using("jobs_b").filter(state="done").count() == 2
        ),
        timeout=deadline(lease=3, work=5),
        message="all four jobs done",
    )
    assert started() == 4


# -- the outbox across aliases ------------------------------------------------------

STEPS = ["before the target insert", "after the target insert", "after the mark"]


@pytest.mark.parametrize("step", STEPS)
def test_a_relay_killed_at_each_step_of_a_delivery_publishes_each_job_once(
    start_relay, start_worker, lock_table, step
):
    """Q1, O2: staged on "default" for a queue on "jobs_b", delivered with a receipt
    per staged id. SIGKILLed before its delivery landed, after it landed but before
    the source rows were marked, or after the mark: an heir relay (after the lease)
    leaves exactly one job per staged row in jobs_b, and each runs once."""
    with transaction.atomic():
        staged = [
            touch.using(queue="routed").enqueue(key=f"k{i}", tenant="acme").id
            for i in range(20)
        ]
    doomed_name = "ultimate_jobs relay doomed"
    if step == "after the mark":
        doomed = start_relay("--relay-id", "doomed", QUEUES=QUEUES, LEASE="2s")
        wait_for(lambda: published() == 20, message="the 20 rows published")
        doomed.kill()
    else:
        release_target = lock_table("jobs_b", "ultimate_jobs_outbox_receipt")
        doomed = start_relay("--relay-id", "doomed", QUEUES=QUEUES, LEASE="2s")
        wait_for(
            lambda: (
                sessions(doomed_name, waiting_on="ultimate_jobs_outbox_receipt") == 1
            ),
            message="its delivery waiting on the receipts' lock",
        )
        assert OutboxMessage.objects.exclude(claimed_by=None).count() == 20
        if step == "after the target insert":
            release_source = lock_table("default", "ultimate_jobs_outbox")
            release_target()
            wait_for(lambda: routed_jobs() == 20, message="its delivery landed")
            wait_for(
                lambda: sessions(doomed_name, waiting_on="published_at") == 1,
                message="its mark waiting on the outbox's lock",
            )
            doomed.kill()
            end_sessions(doomed_name)
            release_source()
        else:
            doomed.kill()
            end_sessions(doomed_name)
            release_target()
    delivered = {"before the target insert": 0}.get(step, 20)
    assert routed_jobs() == delivered
    assert OutboxReceipt.objects.using("jobs_b").count() == delivered
    assert published() == (20 if step == "after the mark" else 0)
    start_relay("--relay-id", "heir", QUEUES=QUEUES, LEASE="2s")
    start_worker("--roles", "worker", "--queues", "routed", QUEUES=QUEUES, LEASE="2s")
    wait_for(
        lambda: (
            published() == 20
            and Job.objects.using("jobs_b").filter(state="done").count() == 20
        ),
        timeout=deadline(lease=2, work=10),
        message="every row published and every job done",
    )
    assert set(Job.objects.using("jobs_b").values_list("id", flat=True)) == set(staged)
    assert not Job.objects.exists()  # nothing published on the staging alias
    assert set(
        OutboxReceipt.objects.using("jobs_b").values_list("id", flat=True)
    ) == set(staged)
    ran = Record.objects.filter(event="ran").values_list("job_id", flat=True)
    assert sorted(map(str, ran)) == sorted(map(str, staged))
    claims = set(OutboxMessage.objects.values_list("claims", flat=True))
    assert claims == ({1} if step == "after the mark" else {2})
