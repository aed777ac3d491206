"""The claim (W2, W5, L4) and the fence (W3) on real PostgreSQL sessions."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tests import claiming
from tests.testapp.jobs import noop, touch
from ultimate_jobs import api
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql import QUERIES

DB = DjangoDatabase("default")


def claim(limit=10, queues=("default",), now=None, lease=30.0, worker="w-test"):
    rows = claiming.claim(
        DB,
        queues=list(queues),
        limit=limit,
        worker_id=worker,
        lease_seconds=lease,
        names=None,
        now=now,
    )
    return rows


@pytest.mark.django_db(transaction=True)
def test_claim_skips_rows_locked_by_another_session(second_connection):
    locked = noop.enqueue(key="locked")
    free = noop.enqueue(key="free")
    with second_connection.transaction():
        second_connection.execute(
            "SELECT 1 FROM ultimate_jobs_job WHERE id = %s FOR UPDATE", [locked.id]
        )
        rows = claim()
    assert [r["id"] for r in rows] == [free.id]


@pytest.mark.django_db
def test_claim_takes_at_most_limit_in_priority_then_age_order():
    low = noop.using(priority=-5).enqueue(key="low")
    first = noop.enqueue(key="first")
    second = noop.enqueue(key="second")
    high = noop.using(priority=50).enqueue(key="high")
    rows = claim(limit=3)
    assert [r["id"] for r in rows] == [high.id, first.id, second.id]
    assert all(r["attempt"] == 1 and not r["refused"] for r in rows)
    assert len({r["lease_owner"] for r in rows}) == 3  # a fresh token per claim
    assert [r["id"] for r in claim()] == [low.id]
    assert claim() == []


@pytest.mark.django_db
def test_claim_serves_only_its_queues_and_skips_paused_ones():
    mail = noop.using(queue="mail").enqueue(key="m")
    noop.using(queue="reports").enqueue(key="r")
    api.pause_queue("mail")
    assert api.paused_queues() == ["mail"]
    assert claim(queues=["mail"]) == []
    assert api.resume_queue("mail") is True
    assert api.resume_queue("mail") is False
    assert [r["id"] for r in claim(queues=["mail"])] == [mail.id]


@pytest.mark.django_db
def test_delayed_rows_wake_when_run_at_passes(jobs):
    answer = noop.using(delay="10m").enqueue(key="later")
    assert claim(now=jobs.now()) == []
    assert [
        r["id"] for r in claim(now=jobs.now() + timedelta(minutes=10, seconds=1))
    ] == [answer.id]


@pytest.mark.django_db
def test_a_lapsed_lease_is_claimable_again_with_a_new_token(jobs):
    answer = touch.enqueue(key="lapse", tenant="t")
    [first] = claim(now=jobs.now(), lease=5)
    assert claim(now=jobs.now() + timedelta(seconds=4)) == []  # still leased
    [second] = claim(now=jobs.now() + timedelta(seconds=6), worker="w-2")
    assert second["id"] == answer.id
    assert second["attempt"] == 2
    assert second["lease_owner"] != first["lease_owner"]
    # The first worker's late writes are fenced out: nothing changes (W3).
    stale = Settler(DB)
    assert stale.complete(first) is False
    assert stale.retry(first, 1.0, RuntimeError("late")) is None
    assert (
        stale.bury(
            first, state="dead", error=RuntimeError("late"), stop_reason="terminal"
        )
        is False
    )
    assert stale.release(first, uncount=True) is False
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner, job.worker_id) == (
        "running",
        2,
        second["lease_owner"],
        "w-2",
    )
    # The current holder settles.
    assert Settler(DB).complete(second) is True
    assert Job.objects.get(pk=answer.id).state == "done"


@pytest.mark.django_db
def test_a_lapsed_lease_on_the_final_attempt_is_buried_by_the_staging_pass(jobs):
    """W5: job_stage owns the burial; the claim only ever takes 'ready' rows."""
    answer = touch.enqueue(key="final", tenant="t")
    Job.objects.filter(pk=answer.id).update(max_attempts=2)
    claim(now=jobs.now(), lease=5)
    claim(now=jobs.now() + timedelta(seconds=6), lease=5)  # attempt 2, also dies
    [buried] = claiming.stage(DB, now=jobs.now() + timedelta(seconds=12))
    assert (buried["id"], buried["state"], buried["staged"]) == (answer.id, "dead", 0)
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.last_error, job.stop_reason) == (
        "dead",
        2,
        "LEASE_LAPSED_FINAL_ATTEMPT",
        "attempts-exhausted",
    )
    assert claim(now=jobs.now() + timedelta(hours=1)) == []  # never handed out again


@pytest.mark.django_db
def test_heartbeat_renews_only_rows_this_claim_holds(jobs):
    a = noop.enqueue(key="a")
    b = noop.enqueue(key="b")
    rows = {r["id"]: r for r in claim(now=jobs.now(), lease=5)}
    api.cancel(b.id, "operator")
    beat = DB.run(
        QUERIES["job_heartbeat"],
        ids=[a.id, b.id, uuid.uuid4()],
        lease_owners=[
            rows[a.id]["lease_owner"],
            rows[b.id]["lease_owner"],
            uuid.uuid4(),
        ],
        lease_seconds=60,
        now=jobs.now(),
    )
    by_id = {r["id"]: r for r in beat}
    assert by_id[a.id]["renewed"] is True
    assert (by_id[b.id]["renewed"], by_id[b.id]["state"]) == (False, "cancelled")
    assert len(beat) == 3
    job = Job.objects.get(pk=a.id)
    assert job.lease_expires_at - jobs.now() > timedelta(seconds=59)


@pytest.mark.django_db
def test_batched_completion_settles_each_row_on_its_own_token(jobs):
    a, b, c = (noop.enqueue(key=k) for k in "abc")
    rows = {r["id"]: r for r in claim(now=jobs.now())}
    settled = DB.run(
        QUERIES["job_complete"],
        ids=[a.id, b.id, c.id],
        lease_owners=[
            rows[a.id]["lease_owner"],
            uuid.uuid4(),
            rows[c.id]["lease_owner"],
        ],
        progresses=[None, None, None],
        now=None,
    )
    assert sorted(r["id"] for r in settled) == sorted([a.id, c.id])
    assert dict(Job.objects.values_list("idempotency_key", "state")) == {
        "a": "done",
        "b": "running",
        "c": "done",
    }
