"""The relay on real commits (O2, O3, O5): claim order and leases, fencing of a stalled
relay, a failed publish stopping the batch, the wake on commit, two databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from tests.testapp.jobs import noop, touch
from tests.testapp.models import Record
from ultimate_jobs import Enqueued, OutboxNoTx
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.enqueue.outbox import OUTBOX_CHANNEL
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.models import Job, OutboxMessage
from ultimate_jobs.runtime.relay import Relay

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def relays():
    """Relays on their own autocommit connections, closed at the end."""
    made: list[DirectDatabase] = []

    def make(relay_id: str, batch_size: int = 100, **kwargs) -> Relay:
        db = DirectDatabase("default", application_name=f"test relay {relay_id}")
        made.append(db)
        return Relay(relay_id=relay_id, batch_size=batch_size, db=db, **kwargs)

    yield make
    for db in made:
        db.close()


def stage(*keys: str) -> list[Enqueued]:
    """Stage noop jobs in ONE committed transaction; answers their Enqueued."""
    with transaction.atomic():
        return [noop.enqueue(key=key) for key in keys]


def claimed_by(token_prefix: str) -> list[str]:
    return list(
        OutboxMessage.objects.filter(claimed_by__startswith=token_prefix + "/")
        .order_by("staged_at", "id")
        .values_list("input__key", flat=True)
    )


def test_rows_are_claimed_and_published_in_staged_order(relays):
    first = stage("a1", "a2", "a3")
    second = stage("b1", "b2")
    relay = relays("r", batch_size=2)
    assert [relay.run_once().claimed for _ in range(4)] == [2, 2, 1, 0]
    jobs = list(Job.objects.order_by("created_at", "id").values_list("id", flat=True))
    assert jobs == [a.id for a in first + second]
    assert not OutboxMessage.objects.filter(published_at=None).exists()


def test_two_relays_never_split_one_transaction(relays):
    """O3: the later rows of a transaction wait while another relay holds an earlier one."""
    stage("a1", "a2", "a3")
    stage("b1")
    one, two = relays("one", batch_size=1), relays("two", batch_size=10)
    db_one = one.db
    rows = one.claim(db_one, "one/t1")
    assert [r["input"] for r in rows] == ['{"key": "a1"}']
    # a2 and a3 may not overtake a1, which "one" holds; b1 is free.
    taken = two.claim(two.db, "two/t1")
    assert [r["id"] for r in taken] == list(
        OutboxMessage.objects.filter(input__key="b1").values_list("id", flat=True)
    )
    assert claimed_by("one") == ["a1"]
    # Once a1 is published, the rest of its transaction is free to claim.
    assert one.mark_published(db_one, rows, "one/t1") == 1
    assert [r["input"] for r in two.claim(two.db, "two/t2")] == [
        '{"key": "a2"}',
        '{"key": "a3"}',
    ]


def test_a_lapsed_claim_is_taken_again_and_the_stalled_relay_writes_nothing(relays):
    """O2: release and mark-published are fenced on claimed_by."""
    stage("s1", "s2")
    t0 = datetime.now(UTC)
    stalled = relays("stalled", now=lambda: t0)
    rows = stalled.claim(stalled.db, "stalled/t")
    assert len(rows) == 2
    later = t0 + timedelta(seconds=stalled.settings.LEASE - 1)
    fresh = relays("fresh", now=lambda: later)
    assert fresh.claim(fresh.db, "fresh/early") == []  # the lease still holds
    later = t0 + timedelta(seconds=stalled.settings.LEASE + 1)
    retaken = fresh.claim(fresh.db, "fresh/t")
    assert [r["id"] for r in retaken] == [r["id"] for r in rows]
    assert [r["claims"] for r in retaken] == [2, 2]
    # The stalled relay wakes up owning nothing: its late writes are no-ops.
    assert stalled.release(stalled.db, rows, "stalled/t") == 0
    assert stalled.mark_published(stalled.db, rows, "stalled/t") == 0
    assert claimed_by("fresh") == ["s1", "s2"]
    assert not OutboxMessage.objects.exclude(published_at=None).exists()
    assert fresh.mark_published(fresh.db, retaken, "fresh/t") == 2


def test_a_failed_publish_stops_the_batch_and_releases_it_at_once(relays):
    """O3: nothing after the failure overtakes it; the rows are claimable at once."""
    stage("p1", "p2")
    stage("p3")
    # A row the jobs table refuses (the check constraint on priority) poisons the publish.
    OutboxMessage.objects.filter(input__key="p1").update(priority=500)
    relay = relays("r")
    with pytest.raises(QueryError):
        relay.run_once()
    assert not Job.objects.exists()
    assert (
        list(OutboxMessage.objects.values_list("claimed_by", "claims"))
        == [(None, 1)] * 3
    )
    OutboxMessage.objects.filter(input__key="p1").update(priority=0)
    assert relay.run_once().published == 3  # at once, no lease to wait for
    assert list(
        Job.objects.order_by("created_at", "id").values_list("input__key", flat=True)
    ) == ["p1", "p2", "p3"]


def test_a_relay_pass_publishes_into_the_queue_and_a_worker_pass_runs_it(relays, jobs):
    with transaction.atomic():
        answer = touch.enqueue(key="k", tenant="acme")
    assert relays("r").run_once().inserted == 1
    [attempt] = jobs.run()
    assert attempt.job_id == answer.id
    assert Record.objects.get().job_id == answer.id


def test_staging_announces_on_commit_only_and_not_while_a_row_waits(
    second_connection,
):
    """O5: pg_notify in the staging statement is delivered on COMMIT."""
    second_connection.execute(f"LISTEN {OUTBOX_CHANNEL}")

    def heard(expected: int) -> list[str]:
        # Wait up to 5 s for what is expected, then 0.3 s for anything more.
        got = (
            [
                n.channel
                for n in second_connection.notifies(timeout=5, stop_after=expected)
            ]
            if expected
            else []
        )
        got += [n.channel for n in second_connection.notifies(timeout=0.3)]
        return got

    with pytest.raises(RuntimeError), transaction.atomic():
        noop.enqueue(key="rolled")
        raise RuntimeError
    assert heard(0) == []
    with transaction.atomic():
        noop.enqueue(key="one")
        noop.enqueue(key="two")
    assert heard(1) == [OUTBOX_CHANNEL]  # once per transaction
    stage("three")  # "one" is committed and unclaimed: the relay was told already
    assert heard(0) == []
    OutboxMessage.objects.update(claimed_by="r/x", claimed_at=datetime.now(UTC))
    stage("four")
    assert heard(1) == [OUTBOX_CHANNEL]


# -- two databases: the jobs tables on another alias than the business rows ---------


@pytest.fixture
def jobs_elsewhere(settings):
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs"}


@pytest.mark.django_db(transaction=True, databases=["default", "jobs"])
def test_an_enqueue_inside_a_transaction_on_another_alias_is_refused(jobs_elsewhere):
    """It cannot join that transaction; publishing outside it would run the job for
    rows that may roll back, so it is OutboxNoTx, and nothing is written."""
    with pytest.raises(OutboxNoTx) as caught, transaction.atomic(using="default"):
        Record.objects.create(key="order", event="created")
        touch.enqueue(key="x", tenant="acme")
    assert "'default'" in str(caught.value) and "'jobs'" in str(caught.value)
    assert "transaction.atomic(using='jobs')" in str(caught.value)
    assert not Record.objects.exists()
    assert not Job.objects.using("jobs").exists()
    assert not OutboxMessage.objects.using("jobs").exists()


@pytest.mark.django_db(transaction=True, databases=["default", "jobs"])
def test_inside_atomic_on_the_jobs_alias_the_job_commits_with_that_transaction(
    jobs_elsewhere, relays, settings
):
    with transaction.atomic(using="jobs"):
        answer = touch.enqueue(key="y", tenant="acme")
        # Staged on the jobs alias's connection, in its open transaction.
        assert not OutboxMessage.objects.using("default").exists()
    assert OutboxMessage.objects.using("jobs").get().id == answer.id
    with pytest.raises(RuntimeError), transaction.atomic(using="jobs"):
        touch.enqueue(key="z", tenant="acme")
        raise RuntimeError
    assert OutboxMessage.objects.using("jobs").count() == 1
    # Outside any transaction it publishes directly on the jobs alias.
    direct = touch.enqueue(key="w", tenant="acme")
    assert Job.objects.using("jobs").get().id == direct.id
    # OUTBOX="off" opts out of the refusal: published at once, outside the transaction.
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs", "OUTBOX": "off"}
    with pytest.raises(RuntimeError), transaction.atomic(using="default"):
        off = touch.enqueue(key="v", tenant="acme")
        raise RuntimeError
    assert Job.objects.using("jobs").filter(pk=off.id).exists()
