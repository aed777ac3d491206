"""The outbox with real processes (O1-O5, B3): an enqueuing process SIGKILLed around its
COMMIT, ordering under two relays and two workers, two relays racing over 2,000 rows,
a relay SIGKILLed mid-batch, a stalled relay's late mark, SIGTERM drains, pickup time."""

from __future__ import annotations

import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from tests.conftest import (
    REPO,
    WorkerProcess,
    conninfo,
    deadline,
    start_deadline,
    wait_for,
    wait_for_progress,
)
from tests.testapp.jobs import charge_card, create_invoice, noop, pickup_stamp, touch
from tests.testapp.models import Record
from ultimate_jobs.models import Job, OutboxMessage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


@pytest.fixture
def start_relay(
    worker_env: Callable[..., dict[str, str]], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``manage.py jobs_relay`` processes; killed at the end of the test."""
    started: list[WorkerProcess] = []

    def start(*args: str, wait_ready: bool = True, **settings: str) -> WorkerProcess:
        log = tmp_path / f"relay-{len(started)}.log"
        relay = WorkerProcess(
            list(args), worker_env(**settings), log, command="jobs_relay"
        )
        started.append(relay)
        if wait_ready:
            relay.wait_log("jobs.relay.started")
        return relay

    yield start
    for relay in started:
        relay.stop()


@pytest.fixture
def lock_jobs_table() -> Iterator[Callable[[], None]]:
    """Hold a SHARE lock on the jobs table, so a relay's publish blocks mid-pass.

    Answers the function that releases it (a rollback); released at the end anyway.
    """
    conn = psycopg.connect(**conninfo(connection.settings_dict))
    conn.execute("LOCK TABLE ultimate_jobs_job IN SHARE MODE")

    def release() -> None:
        conn.rollback()

    yield release
    conn.rollback()
    conn.close()


def outbox_rows() -> list[Any]:
    return list(
        OutboxMessage.objects.order_by("staged_at", "id").values(
            "id", "claimed_by", "claims", "published_at"
        )
    )


def published_count() -> int:
    return OutboxMessage.objects.exclude(published_at=None).count()


def inserted_by(process: WorkerProcess) -> int:
    return sum(
        int(n)
        for n in re.findall(r"jobs\.outbox\.published .*?inserted=(\d+)", process.log())
    )


def publish_blocked(relay_id: str) -> bool:
    """The relay's publish (job_enqueue's INSERT) was sent and waits on the lock held by
    lock_jobs_table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name LIKE %s AND wait_event_type = 'Lock'"
            " AND query LIKE %s",
            [f"ultimate_jobs relay {relay_id}%", "%INSERT INTO ultimate_jobs_job%"],
        )
        return cursor.fetchone()[0] == 1


def relay_sessions(relay_id: str) -> list[Any]:
    """What the relay's server sessions are doing, for a failure's message."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, wait_event_type, wait_event, left(query, 80)"
            " FROM pg_stat_activity WHERE application_name LIKE %s",
            [f"ultimate_jobs relay {relay_id}%"],
        )
        return cursor.fetchall()


def backend_gone(application_name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
            [application_name + "%"],
        )
        return cursor.fetchone()[0] == 0


ENQUEUE_AND_DIE = """
import os, signal, sys
import django
django.setup()
from django.db import transaction
from tests.testapp.jobs import touch
from tests.testapp.models import Record
key, when = sys.argv[1], sys.argv[2]
with transaction.atomic():
    Record.objects.create(key=key, event="order")
    answer = touch.enqueue(key=key, tenant="acme")
    print(answer.id, flush=True)
    if when == "before-commit":
        os.kill(os.getpid(), signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)  # right after COMMIT: nothing else runs
"""


def enqueue_and_die(env: dict[str, str], key: str, when: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", ENQUEUE_AND_DIE, key, when],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout.strip()


def test_a_process_killed_right_after_commit_still_gets_its_job_run(
    start_worker, worker_env
):
    """Done-when 2 (O1, B3): no on_commit callback to lose; the row is durable."""
    start_worker("--concurrency", "2")  # default roles: worker and relay
    env = worker_env()
    lost = enqueue_and_die(env, "before", "before-commit")
    kept = enqueue_and_die(env, "after", "after-commit")
    wait_for(lambda: Job.objects.filter(pk=kept, state="done").exists())
    assert list(Record.objects.values_list("key", "event")) == [
        ("after", "order"),
        ("after", "ran"),
    ]
    assert [r["id"] for r in outbox_rows()] == [Job.objects.get().id]
    assert str(Job.objects.get().id) == kept
    assert not OutboxMessage.objects.filter(pk=lost).exists()


def test_a_rolled_back_enqueue_never_runs_while_a_relay_and_worker_run(start_worker):
    """Done-when 1 (O1), with the relay and a worker live."""
    start_worker("--concurrency", "2")
    with pytest.raises(RuntimeError), transaction.atomic():
        doomed = touch.enqueue(key="doomed", tenant="acme")
        raise RuntimeError
    with transaction.atomic():
        marker = touch.enqueue(key="marker", tenant="acme")
    wait_for(lambda: Job.objects.filter(pk=marker.id, state="done").exists())
    assert not Job.objects.filter(pk=doomed.id).exists()
    assert not OutboxMessage.objects.filter(pk=doomed.id).exists()
    assert list(Record.objects.values_list("key", flat=True)) == ["marker"]


def stage_pairs(count: int) -> list[tuple[Any, Any]]:
    pairs = []
    for i in range(count):
        with transaction.atomic():
            invoice = create_invoice.enqueue(key=f"inv-{i}")
            charge = charge_card.enqueue(key=f"chg-{i}", invoice_job_id=str(invoice.id))
        pairs.append((invoice, charge))
    return pairs


def check_pairs(pairs: list[tuple[Any, Any]], allowed: set[str]) -> None:
    wait_for(
        lambda: Job.objects.filter(state="done").count() == 2 * len(pairs),
        message="every pair done",
    )
    seen = dict(
        Record.objects.filter(key__startswith="chg-").values_list("key", "event")
    )
    assert len(seen) == len(pairs)
    assert set(seen.values()) <= allowed, seen
    published: dict[Any, Any] = dict(
        OutboxMessage.objects.values_list("id", "published_at")
    )
    created: dict[Any, Any] = dict(Job.objects.values_list("id", "created_at"))
    for invoice, charge in pairs:
        assert published[invoice.id] <= published[charge.id]
        assert created[invoice.id] <= created[charge.id]


def test_a_pair_staged_in_one_transaction_is_claimed_in_order_by_two_relays_and_workers(
    start_worker, start_relay
):
    """Done-when 3 (O3): the charge is never published first, never claimed first.

    Batches of 1 and 3 split pairs across passes and relays; workers run two jobs at
    a time, so only the claim order is strict (the charge sees its invoice claimed).
    """
    start_relay("--batch-size", "1", "--relay-id", "r1")
    start_relay("--batch-size", "3", "--relay-id", "r2")
    for _ in range(2):
        start_worker("--roles", "worker", "--concurrency", "2")
    pairs = stage_pairs(40)
    check_pairs(pairs, {"charge:running", "charge:done"})


def test_at_concurrency_one_a_pair_runs_strictly_in_order(start_worker, start_relay):
    """O3: strict execution order holds with one worker at concurrency 1."""
    start_relay("--batch-size", "1", "--relay-id", "r1")
    start_relay("--batch-size", "3", "--relay-id", "r2")
    start_worker("--roles", "worker", "--concurrency", "1")
    pairs = stage_pairs(20)
    check_pairs(pairs, {"charge:done"})
    events = list(Record.objects.order_by("id").values_list("key", flat=True))
    for i in range(len(pairs)):
        assert events.index(f"inv-{i}") < events.index(f"chg-{i}")


def test_two_relays_racing_over_2000_rows_publish_each_exactly_once(start_relay):
    """Done-when 4 (O2): every row claimed once, every job inserted once."""
    staged = []
    for t in range(20):
        with transaction.atomic():
            staged += noop.enqueue_many([{"key": f"{t}-{i}"} for i in range(50)])
    relays = [
        start_relay("--relay-id", f"r{n}", "--batch-size", size, wait_ready=False)
        for n, size in ((1, "100"), (2, "37"))
    ]
    for t in range(20, 40):  # more arrive while they race
        with transaction.atomic():
            staged += noop.enqueue_many([{"key": f"{t}-{i}"} for i in range(50)])
    wait_for_progress(published_count, 2000, message="2000 rows published")
    assert set(Job.objects.values_list("id", flat=True)) == {a.id for a in staged}
    assert set(OutboxMessage.objects.values_list("claims", flat=True)) == {1}
    shares = [inserted_by(r) for r in relays]
    assert sum(shares) == 2000, shares
    print(f"\nrows published per relay: {shares}")


@pytest.mark.needs_session  # waits for the killed relay's server session to end
@pytest.mark.parametrize("moment", ["publishing", "after its publish landed"])
def test_a_relay_killed_mid_batch_loses_nothing_and_doubles_nothing(
    start_relay, start_worker, lock_jobs_table, moment
):
    """Done-when 4 (O2, B3): its rows are taken again after the lease; the re-publish
    of rows it had already published inserts nothing, so every handler runs once.

    "publishing": killed while its publish waits on a lock (whether the server still
    commits that statement for a vanished client is the server's business; both
    outcomes must end the same). "after its publish landed": stopped while waiting,
    its publish let through and committed, then killed before it could mark.
    """
    for t in range(5):
        with transaction.atomic():
            touch.enqueue_many(
                [{"key": f"{t}-{i}", "tenant": "acme"} for i in range(50)]
            )
    doomed = start_relay("--relay-id", "doomed", LEASE="2s")
    wait_for(lambda: publish_blocked("doomed"), message="its publish waiting")
    assert OutboxMessage.objects.exclude(claimed_by=None).count() == 100
    if moment == "publishing":
        doomed.kill()
        lock_jobs_table()
    else:
        doomed.signal(signal.SIGSTOP)
        lock_jobs_table()
        try:
            wait_for(lambda: Job.objects.count() == 100, message="its publish landed")
        except AssertionError as failure:
            sessions = relay_sessions("doomed")
            raise AssertionError(f"{failure}; sessions: {sessions}") from failure
        doomed.kill()
    wait_for(lambda: backend_gone("ultimate_jobs relay doomed"))
    published_unmarked = Job.objects.count()
    assert published_unmarked in ((0, 100) if moment == "publishing" else (100,))
    assert published_count() == 0
    start_relay("--relay-id", "heir", LEASE="2s")
    start_worker("--roles", "worker", "--concurrency", "4", LEASE="2s")
    wait_for(
        lambda: (
            published_count() == 250 and Job.objects.filter(state="done").count() == 250
        ),
        timeout=deadline(lease=2, work=10),
        message="every row published and every job done",
    )
    assert Job.objects.count() == 250
    assert Record.objects.filter(event="ran").count() == 250
    assert len(set(Record.objects.values_list("key", flat=True))) == 250
    claims = [r["claims"] for r in outbox_rows()]
    assert claims == [2] * 100 + [1] * 150
    rows = outbox_rows()
    assert {r["claimed_by"].split("/")[0] for r in rows} == {"heir"}


def test_a_stalled_relays_late_mark_is_a_no_op(start_relay, lock_jobs_table):
    """Done-when 4 (O2): fenced on claimed_by, the late mark retires nothing."""
    with transaction.atomic():
        noop.enqueue_many([{"key": str(i)} for i in range(10)])
    stalled = start_relay("--relay-id", "stalled", LEASE="2s")
    wait_for(lambda: publish_blocked("stalled"), message="its publish waiting")
    stalled.signal(signal.SIGSTOP)
    try:
        lock_jobs_table()  # its publish lands server-side; the process sleeps on
        wait_for(lambda: Job.objects.count() == 10)
        start_relay("--relay-id", "heir", LEASE="2s")
        wait_for(lambda: published_count() == 10, timeout=deadline(lease=2))
        after = outbox_rows()
        assert {r["claimed_by"].split("/")[0] for r in after} == {"heir"}
        assert {r["claims"] for r in after} == {2}
    finally:
        stalled.signal(signal.SIGCONT)
    stalled.wait_log("jobs.outbox.unowned")
    assert "write=mark" in stalled.log()
    assert outbox_rows() == after
    assert Job.objects.count() == 10


def test_sigterm_lets_the_pass_in_flight_finish_then_the_relay_exits(
    start_relay, lock_jobs_table
):
    """W6 for the relay: publish and mark complete before the process exits."""
    with transaction.atomic():
        noop.enqueue_many([{"key": str(i)} for i in range(10)])
    relay = start_relay("--relay-id", "draining")
    wait_for(lambda: publish_blocked("draining"), message="its publish waiting")
    relay.terminate()
    relay.wait_log("jobs.process.draining")
    assert relay.proc.poll() is None  # still inside its pass
    lock_jobs_table()
    assert relay.wait() == 0
    assert published_count() == 10
    assert Job.objects.count() == 10
    assert "jobs.relay.stopped" in relay.log()


def started_event(key: str) -> Callable[[], str | None]:
    def event() -> str | None:
        return Record.objects.filter(key=key).values_list("event", flat=True).first()

    return event


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[max(0, round(len(ordered) * 0.99) - 1)]
    return f"median {statistics.median(ordered):6.2f} ms  p99 {p99:7.2f} ms"


@pytest.mark.needs_wake
@pytest.mark.parametrize(
    "arrangement", ["relay and worker processes", "jobs_worker", "direct"]
)
def test_pickup_from_commit_through_the_outbox(start_worker, start_relay, arrangement):
    """Done-when 6 (N2): measured and printed, never asserted (no timed tests).

    200 jobs one after another, each committed once the previous one started. From
    the COMMIT returning in this process to the first line of the body in the worker
    (same machine, same wall clock), split into: commit -> job row published (created_at), ->
    claimed (started_at), -> the body running. "direct" is the same enqueue outside a
    transaction (no outbox), for comparison.
    """
    if arrangement == "relay and worker processes":
        start_relay().wait_log("jobs.wake.live")
        worker = start_worker("--roles", "worker", "--concurrency", "4")
    elif arrangement == "jobs_worker":
        worker = start_worker("--concurrency", "4")  # worker and relay in one process
    else:
        worker = start_worker("--roles", "worker", "--concurrency", "4")
    worker.wait_log("jobs.wake.live")
    total, published, claimed, dispatched = [], [], [], []
    for i in range(200):
        key = f"lat-{i}"
        if arrangement == "direct":
            pickup_stamp.enqueue(key=key)
        else:
            with transaction.atomic():
                pickup_stamp.enqueue(key=key)
        committed = time.time()
        event = wait_for(started_event(key), interval=0.0005)
        started = float(event.removeprefix("started:"))
        job: Any = Job.objects.get(input__key=key)
        created, claimed_at = job.created_at.timestamp(), job.started_at.timestamp()
        total.append((started - committed) * 1000)
        published.append((created - committed) * 1000)
        claimed.append((claimed_at - created) * 1000)
        dispatched.append((started - claimed_at) * 1000)
    assert Record.objects.count() == 200
    print(
        f"\npickup from COMMIT, {arrangement}, 200 jobs:\n"
        f"  commit -> body start  {percentiles(total)}\n"
        f"  commit -> published   {percentiles(published)}\n"
        f"  published -> claimed  {percentiles(claimed)}\n"
        f"  claimed -> body start {percentiles(dispatched)}"
    )
