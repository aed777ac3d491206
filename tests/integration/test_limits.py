"""Fleet caps and per-process budgets as the claim decides them (L1-L3), on real
PostgreSQL sessions with the testing clock."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from tests import claiming
from tests.conftest import wait_for
from tests.testapp.jobs import capped, exclusive, noop, per_account, solo, touch
from tests.testapp.models import Record
from ultimate_jobs import JobDeclarationInvalid, registry
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.run import LEASE_LOST
from ultimate_jobs.limits.budgets import claim_parameters
from ultimate_jobs.limits.slots import LeaseStore, job_lease_key, keyed_lease_key
from ultimate_jobs.models import Job, Lease
from ultimate_jobs.runtime.admission import Admission, admit
from ultimate_jobs.runtime.outcomes import Outcome
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.testing import JobsTestRunner
from ultimate_jobs.testing.factories import LeaseFactory

DB = DjangoDatabase("default")
CAPPED = job_lease_key(capped.name)


def claim(jobs, limit=10, at=timedelta(0), lease=30.0, **rooms):
    params = claim_parameters(registry)
    params.update(rooms)
    return claiming.claim(
        DB,
        queues=["default"],
        limit=limit,
        worker_id="w-test",
        lease_seconds=lease,
        names=None,
        now=jobs.now() + at,
        **rooms,
    )


def states(*answers):
    return [Job.objects.values_list("state", "attempt").get(pk=a.id) for a in answers]


@pytest.mark.django_db
def test_a_job_cap_claims_at_most_n_and_skips_the_rest_before_the_limit(jobs):
    """L1: over the cap the rows stay ready, attempt unspent; once the cap is full
    the scan skips them before its LIMIT, so the work behind them is claimed."""
    held = [capped.enqueue(key=f"c{i}") for i in range(5)]
    other = noop.enqueue(key="behind")
    rows = claim(jobs, limit=3)
    assert [r["id"] for r in rows] == [held[0].id, held[1].id]
    assert [r["lease_key"] for r in rows] == [CAPPED, CAPPED]
    assert [r["id"] for r in claim(jobs, limit=3)] == [other.id]
    holders = LeaseStore(DB).holders(CAPPED, now=jobs.now())
    assert [(h.slot, h.job_id) for h in holders] == [(0, held[0].id), (1, held[1].id)]
    assert [h.holder for h in holders] == [
        rows[0]["lease_owner"],
        rows[1]["lease_owner"],
    ]
    assert claim(jobs) == []  # full: nothing is touched
    assert states(*held[2:]) == [("ready", 0)] * 3


@pytest.mark.django_db
def test_a_settled_run_frees_its_slot_with_no_release_call(jobs):
    """L1: a slot is held only while its run runs under the claim that took it."""
    first, second, third = (capped.enqueue(key=k) for k in "abc")
    a, b = claim(jobs)
    assert [a["id"], b["id"]] == [first.id, second.id]
    assert Settler(DB).complete(a) is True
    [c] = claim(jobs)
    assert c["id"] == third.id
    slot = Lease.objects.get(key=CAPPED, holder=c["lease_owner"])
    assert (slot.slot, slot.taken_from) == (0, a["lease_owner"])
    assert sorted(h.job_id for h in LeaseStore(DB).holders(CAPPED, now=jobs.now())) == (
        sorted([second.id, third.id])
    )


@pytest.mark.django_db
def test_a_lapsed_slot_frees_after_the_lease_and_its_run_is_rescued(jobs):
    """L1: a killed worker's slot is reclaimed by TTL; the rescue takes it over."""
    first = solo.enqueue(key="first")
    waiting = solo.enqueue(key="waiting")
    [row] = claim(jobs, lease=5)
    assert claim(jobs, at=timedelta(seconds=4), lease=5) == []  # still held
    [rescued] = claim(jobs, at=timedelta(seconds=6), lease=5)
    assert (rescued["id"], rescued["attempt"]) == (first.id, 2)
    slot = Lease.objects.get(key=job_lease_key(solo.name))
    assert (slot.holder, slot.taken_from) == (
        rescued["lease_owner"],
        row["lease_owner"],
    )
    assert states(waiting) == [("ready", 0)]


@pytest.mark.django_db
def test_the_heartbeat_renews_slots_with_the_lease_and_reports_a_lost_one(jobs):
    """L1: renewed by the same statement as the run's lease; a slot taken over after
    a lapse shows as slots = 0 on the (late) renewal."""
    capped.enqueue(key="a")
    [row] = claim(jobs, lease=5)

    def beat(at):
        [answer] = DB.run(
            QUERIES["job_heartbeat"],
            ids=[row["id"]],
            lease_owners=[row["lease_owner"]],
            lease_seconds=5,
            now=jobs.now() + at,
        )
        return answer

    assert (
        beat(timedelta(seconds=4))["renewed"],
        beat(timedelta(seconds=4))["slots"],
    ) == (
        True,
        1,
    )
    job = Job.objects.get(pk=row["id"])
    assert (
        Lease.objects.get(holder=row["lease_owner"]).expires_at == job.lease_expires_at
    )
    Lease.objects.filter(holder=row["lease_owner"]).update(holder=uuid.uuid4())
    answer = beat(timedelta(seconds=5))
    assert (answer["renewed"], answer["slots"]) == (True, 0)


@pytest.mark.django_db
def test_a_keyed_limit_caps_each_key_and_leaves_the_others_free(jobs):
    """L2 wait: one run per account; a busy account's runs stay ready, unspent."""
    a1 = per_account.enqueue(key="a1", account="a")
    a2 = per_account.enqueue(key="a2", account="a")
    b1 = per_account.enqueue(key="b1", account="b")
    rows = claim(jobs)
    assert [r["id"] for r in rows] == [a1.id, b1.id]
    assert [r["lease_key"] for r in rows] == [
        keyed_lease_key(per_account.name, "a"),
        keyed_lease_key(per_account.name, "b"),
    ]
    assert Job.objects.get(pk=a1.id).concurrency_key == keyed_lease_key(
        per_account.name, "a"
    )
    assert claim(jobs) == []
    assert states(a2) == [("ready", 0)]
    Settler(DB).complete(rows[0])
    assert [r["id"] for r in claim(jobs)] == [a2.id]


@pytest.mark.django_db
def test_when_busy_fail_refuses_with_job_key_busy_and_the_body_never_runs(jobs):
    """L2 fail, W9: the claim settles the run failed, attempt not counted, and
    on_settled is told (outcome refused)."""
    holder = exclusive.enqueue(key="holder", account="acme")
    [row] = claim(jobs)
    assert row["id"] == holder.id
    busy = exclusive.enqueue(key="busy", account="acme")
    other = exclusive.enqueue(key="other", account="globex")
    rows = claim(jobs)
    assert [(r["id"], r["refused"]) for r in rows] == [
        (busy.id, True),
        (other.id, False),
    ]
    job = Job.objects.get(pk=busy.id)
    assert (job.state, job.attempt, job.error_code, job.stop_reason) == (
        "failed",
        0,
        "X_JOB_KEY_BUSY",
        "refused",
    )
    assert job.last_error.startswith("X_JOB_KEY_BUSY: every slot of job-key:")
    assert admit(DB, registry, rows[0]) is Admission.REFUSED
    assert list(Record.objects.values_list("key", "event")) == [
        ("busy", f"settled:{Outcome.REFUSED}:X_JOB_KEY_BUSY")
    ]


@pytest.mark.django_db
def test_a_run_is_never_refused_by_its_own_leftover_slot(jobs):
    """L2: the only holder being this run's own earlier claim (here a slot row its
    last attempt left behind) is no reason to refuse: the run takes the slot over."""
    answer = exclusive.enqueue(key="again", account="acme")
    leftover = uuid.uuid4()
    LeaseFactory.create(
        key=keyed_lease_key(exclusive.name, "acme"),
        slot=0,
        name=exclusive.name,
        holder=leftover,
        job_id=answer.id,
        acquired_at=jobs.now(),
        expires_at=jobs.now() + timedelta(minutes=5),
    )
    [row] = claim(jobs)
    assert (row["id"], row["refused"]) == (answer.id, False)
    slot = Lease.objects.get(key=keyed_lease_key(exclusive.name, "acme"))
    assert (slot.holder, slot.taken_from) == (row["lease_owner"], leftover)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stale_row", [False, True], ids=["new-slot", "stale-slot"])
def test_two_claims_racing_for_one_free_slot_take_it_once(second_connection, stale_row):
    """L1: the other claim saw the slot free (no row, or a finished holder's row) in
    its snapshot; it waits on the slot row, then takes nothing and claims nothing."""
    if stale_row:  # a finished run left its slot row behind
        solo.enqueue(key="earlier")
        [earlier] = claim(JobsTestRunner())
        Settler(DB).complete(earlier)
    solo.enqueue(key="one")
    two = solo.enqueue(key="two")
    params = claiming.claim_params(limit=1, worker_id="w-2")
    result = {}

    def our_claim():
        try:
            result["rows"] = claim(JobsTestRunner())
        finally:
            connections.close_all()

    with second_connection.transaction():
        theirs = second_connection.execute(QUERIES["job_claim"].text, params).fetchall()
        assert len(theirs) == 1  # slot taken, not committed yet
        racer = threading.Thread(target=our_claim)
        racer.start()
        wait_for(
            lambda: (
                second_connection.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
                ).fetchone()[0]
                == 1
            ),
            message="the second claim waiting on the slot row",
        )
    racer.join(10)
    assert result["rows"] == []
    assert states(two) == [("ready", 0)]
    [holder] = LeaseStore(DB).holders(job_lease_key(solo.name))
    assert Job.objects.get(pk=holder.job_id).worker_id == "w-2"


@pytest.mark.django_db
def test_a_keyed_run_whose_row_has_no_key_gets_it_and_then_waits_its_turn(jobs):
    """L2: a row enqueued without its key (another path, an older declaration) is
    handed back once with the key computed from its input, attempt unspent."""
    first = per_account.enqueue(key="first", account="acme")
    legacy = per_account.enqueue(key="legacy", account="acme")
    Job.objects.filter(pk=legacy.id).update(concurrency_key=None)
    row, bare = claim(jobs)  # no key on the legacy row: claimed uncapped, then triaged
    assert row["id"] == first.id
    assert (bare["id"], bare["lease_key"]) == (legacy.id, None)
    assert admit(DB, registry, bare, now=jobs.now()) is Admission.DEFERRED
    job = Job.objects.get(pk=legacy.id)
    assert (job.state, job.attempt, job.concurrency_key) == (
        "ready",
        0,
        keyed_lease_key(per_account.name, "acme"),
    )
    assert claim(jobs) == []  # now it waits for the key like any other run


@pytest.mark.django_db
def test_a_key_that_cannot_be_computed_at_claim_fails_the_attempt_bodiless(jobs):
    """L2: key(input) failing at claim takes the ordinary failure path (terminal)."""
    answer = per_account.enqueue(key="bad", account="acme")
    Job.objects.filter(pk=answer.id).update(
        concurrency_key=None, input={"key": "bad", "account": ""}
    )
    [row] = claim(jobs)
    assert admit(DB, registry, row, now=jobs.now()) is Admission.FAILED
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.error_code, job.stop_reason) == (
        "dead",
        "X_JOB_DECLARATION_INVALID",
        "terminal",
    )
    assert not Record.objects.exists()


@pytest.mark.django_db
def test_the_testing_runner_honours_caps_and_stores_missing_keys(jobs):
    """X1 with L2: run_jobs goes through the same claim, triage and settle."""
    done = per_account.enqueue(key="k1", account="acme")
    legacy = per_account.enqueue(key="k2", account="acme")
    Job.objects.filter(pk=legacy.id).update(concurrency_key=None)
    attempts = jobs.run()
    assert [(a.job_id, a.outcome) for a in attempts] == [
        (done.id, "completed"),
        (legacy.id, "completed"),
    ]
    assert states(done, legacy) == [("done", 1), ("done", 1)]


@pytest.mark.django_db
def test_queue_and_tenant_rooms_bound_the_claim(jobs):
    """L3: the claim takes no more than each budget's room, and none for a tenant
    with none left, skipping its rows before the limit."""
    a = [touch.enqueue(key=f"a{i}", tenant="a") for i in range(3)]
    b = [touch.enqueue(key=f"b{i}", tenant="b") for i in range(2)]
    rows = claim(jobs, tenant_room=1)
    assert [r["id"] for r in rows] == [a[0].id, b[0].id]
    rows = claim(jobs, tenant_ids=["a"], tenant_rooms=[0], tenant_room=5)
    assert [r["id"] for r in rows] == [b[1].id]
    rows = claim(jobs, queue_rooms=[1])
    assert [r["id"] for r in rows] == [a[1].id]
    assert claim(jobs, queue_rooms=[0]) == []


@pytest.mark.django_db
def test_the_concurrency_key_is_checked_at_enqueue_and_nothing_is_written():
    """L2, B1: a key that is empty, not a string or over 200 characters."""
    for account in ("", "x" * 201):
        with pytest.raises(JobDeclarationInvalid) as caught:
            per_account.enqueue(key="k", account=account)
        assert caught.value.field == "concurrency.key"
    with pytest.raises(JobDeclarationInvalid):
        per_account.enqueue_many(
            [{"key": "ok", "account": "a"}, {"key": "no", "account": ""}]
        )
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_releasing_a_slot_deletes_it_and_wakes_the_queue(second_connection, jobs):
    """L1, N1: the worker's release after the settle announces the queue."""
    capped.enqueue(key="a")
    [row] = claim(jobs)
    second_connection.execute("LISTEN ultimate_jobs_wake")
    Settler(DB).complete(row)
    assert LeaseStore(DB).release(row["lease_owner"], queue="default") == 1
    assert [
        n.payload for n in second_connection.notifies(timeout=0.5, stop_after=1)
    ] == ["default"]
    assert not Lease.objects.exists()
    assert LeaseStore(DB).release(row["lease_owner"], queue="default") == 0


@pytest.mark.django_db
def test_purge_deletes_lapsed_slot_rows_only(jobs):
    capped.enqueue(key="a")
    solo.enqueue(key="b")
    claim(jobs, lease=5)
    store = LeaseStore(DB)
    assert store.purge(now=jobs.now() + timedelta(seconds=4)) == 0
    assert store.purge(now=jobs.now() + timedelta(seconds=6), batch=1) == 1
    assert store.purge(now=jobs.now() + timedelta(seconds=6)) == 1
    assert not Lease.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("taken_over", [False, True])
def test_a_worker_cancels_a_run_whose_slot_was_taken_over(jobs, caplog, taken_over):
    """L1: the heartbeat answers how many slots it renewed; none for a capped run means
    another claim took its slot: the run's token is cancelled (jobs.slot.lost)."""
    capped.enqueue(key="a")
    [row] = claim(jobs)
    worker = Worker(settings=load_settings({}), queues=["default"], concurrency=1)
    entry = worker.ledger.add(row)
    if taken_over:
        Lease.objects.filter(holder=row["lease_owner"]).update(holder=uuid.uuid4())
    with caplog.at_level(logging.ERROR, logger="ultimate_jobs.runtime.heartbeat"):
        worker.heartbeat.run_once(DB)  # type: ignore[arg-type]
    assert entry.token.is_set() is taken_over
    assert ("jobs.slot.lost" in caplog.messages) is taken_over
    if taken_over:
        assert entry.token.reason == LEASE_LOST


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--per-tenant", "0"], "--per-tenant=0"),
        (["--global-limit", "-2"], "--global-limit=-2"),
        (["--per-queue", "mail"], "--per-queue='mail'"),
        (["--rate-per-tenant", "fast"], "--rate-per-tenant='fast'"),
    ],
)
def test_bad_budget_options_stop_the_worker_naming_the_option(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("jobs_worker", *args)
