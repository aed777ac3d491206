"""Staging in the caller's transaction (O1, O4) and the testing runner's relay (X1).

These run inside the test's transaction (pytest-django's django_db): its atomic blocks
do not count as the caller's, so a plain enqueue publishes directly, and an enqueue
inside the test's own transaction.atomic() stages.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction

from tests.testapp.jobs import charge_card, create_invoice, noop, per_account, touch
from tests.testapp.models import Record
from ultimate_jobs import Enqueued, JobDuplicate, OutboxNoTx
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.enqueue.rows import Row as JobRow
from ultimate_jobs.enqueue.write import publish
from ultimate_jobs.limits.slots import keyed_lease_key
from ultimate_jobs.models import Job, OutboxMessage

pytestmark = pytest.mark.django_db


class Rollback(Exception):
    pass


def test_a_plain_enqueue_in_a_test_publishes_directly():
    answer = touch.enqueue(tenant="acme", key="direct")
    assert Job.objects.filter(pk=answer.id).exists()
    assert not OutboxMessage.objects.exists()


def test_inside_atomic_the_job_is_staged_with_its_own_ids_and_no_job_row_yet():
    with transaction.atomic():
        answer = touch.enqueue(key="staged", tenant="acme")
        staged = OutboxMessage.objects.get()
    assert answer == Enqueued(staged.id, staged.run_id, deduped=False)  # H1
    assert answer.id.version == 7
    assert not Job.objects.exists()
    assert (staged.name, staged.queue, staged.input, staged.tenant_id) == (
        "testapp.touch",
        "default",
        {"key": "staged", "tenant": "acme"},
        "acme",
    )
    assert (staged.idempotency_key, staged.max_attempts) == ("staged", 5)
    assert staged.published_at is None and staged.claimed_by is None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        assert staged.staged_tx == cursor.fetchone()[0]  # the caller's transaction


def test_rollback_leaves_no_row_anywhere_and_nothing_runs(jobs):
    """Done-when 1 (O1): the staged row goes with the business rows."""
    with pytest.raises(Rollback), transaction.atomic():
        Record.objects.create(key="order", event="created")
        answer = touch.enqueue(tenant="acme", key="rolled-back")
        assert OutboxMessage.objects.filter(pk=answer.id).exists()
        raise Rollback
    assert not Record.objects.exists()
    assert not OutboxMessage.objects.exists()
    assert not Job.objects.exists()
    assert jobs.run() == []
    assert not Job.objects.exists()


def test_the_testing_runner_relays_staged_jobs_first(jobs):
    with transaction.atomic():
        answer = touch.enqueue(tenant="acme", key="via-outbox")
    [attempt] = jobs.run()
    assert (attempt.job_id, attempt.outcome) == (answer.id, "completed")
    job = Job.objects.get()
    assert (job.id, job.run_id, job.state) == (answer.id, answer.run_id, "done")
    assert list(Record.objects.values_list("key", "event", "job_id")) == [
        ("via-outbox", "ran", answer.id)
    ]
    outbox = OutboxMessage.objects.get()
    assert outbox.published_at is not None
    assert (str(outbox.claimed_by).split("/")[0], outbox.claims) == ("testing", 1)


def test_enqueue_many_stages_every_row_in_order(jobs):
    with transaction.atomic():
        answers = noop.enqueue_many([{"key": str(i)} for i in range(5)])
    staged = list(OutboxMessage.objects.order_by("staged_at", "id"))
    assert [m.id for m in staged] == [a.id for a in answers]
    assert [m.input["key"] for m in staged] == ["0", "1", "2", "3", "4"]
    assert len(jobs.run()) == 5
    assert set(Job.objects.values_list("id", flat=True)) == {a.id for a in answers}


def test_a_delay_counts_from_the_enqueue(jobs):
    with transaction.atomic():
        answer = touch.using(delay="1h").enqueue(tenant="acme", key="later")
    staged = OutboxMessage.objects.get()
    assert (staged.run_at - staged.staged_at).total_seconds() == 3600
    assert jobs.run() == []  # published, not due
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.run_at) == ("delayed", staged.run_at)
    jobs.travel(hours=1, seconds=1)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"


def test_outbox_required_refuses_an_enqueue_outside_a_transaction(settings):
    """O4: OUTBOX="required" makes the missing transaction an error; nothing written."""
    settings.ULTIMATE_JOBS = {"OUTBOX": "required"}
    with pytest.raises(OutboxNoTx) as caught:
        touch.enqueue(tenant="acme", key="no-tx")
    assert caught.value.code == "X_OUTBOX_NO_TX"
    assert "OUTBOX='required'" in str(caught.value)
    assert "testapp.touch" in str(caught.value)
    assert not Job.objects.exists() and not OutboxMessage.objects.exists()
    with transaction.atomic():
        touch.enqueue(tenant="acme", key="in-tx")
    assert OutboxMessage.objects.count() == 1


def test_outbox_off_publishes_directly_inside_a_transaction(settings):
    settings.ULTIMATE_JOBS = {"OUTBOX": "off"}
    with transaction.atomic():
        answer = touch.enqueue(tenant="acme", key="off")
        assert Job.objects.filter(pk=answer.id).exists()
    assert not OutboxMessage.objects.exists()


def test_on_conflict_error_is_checked_against_live_jobs_at_staging():
    held = touch.enqueue(tenant="acme", key="taken")
    with transaction.atomic():
        with pytest.raises(JobDuplicate) as caught:
            touch.using(on_conflict="error").enqueue(tenant="acme", key="taken")
        assert caught.value.existing_id == held.id
        assert not OutboxMessage.objects.exists()
        fresh = touch.using(on_conflict="error").enqueue(tenant="acme", key="free")
    assert OutboxMessage.objects.get().id == fresh.id


def test_a_staged_key_that_a_live_job_holds_is_deduped_at_the_publish(jobs):
    """Only the publish can tell: the staged ids then name no row (documented)."""
    held = touch.enqueue(tenant="acme", key="busy")
    with transaction.atomic():
        staged = touch.enqueue(tenant="acme", key="busy")
    assert not staged.deduped
    [attempt] = jobs.run()
    assert attempt.job_id == held.id
    assert not Job.objects.filter(pk=staged.id).exists()
    assert OutboxMessage.objects.get().published_at is not None


def test_a_pair_staged_in_one_transaction_runs_in_order(jobs):
    with transaction.atomic():
        invoice = create_invoice.enqueue(key="inv")
        charge_card.enqueue(key="chg", invoice_job_id=str(invoice.id))
    assert [a.job_id for a in jobs.run()][:1] == [invoice.id]
    assert list(Record.objects.values_list("event", flat=True)) == [
        "invoice",
        "charge:done",
    ]


def test_a_publish_after_the_job_finished_does_not_run_it_again(jobs):
    """Done-when 5 (O2): a re-publish under the row's own id inserts nothing."""
    with transaction.atomic():
        answer = touch.enqueue(tenant="acme", key="once")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    # The relay died between publish and mark: the row is published again.
    OutboxMessage.objects.update(published_at=None, claimed_at=None, claimed_by=None)
    assert jobs.run() == []
    message = OutboxMessage.objects.get()
    assert (message.published_at is not None, message.claims) == (True, 2)
    assert Job.objects.count() == 1
    assert Job.objects.get().state == "done"
    assert Record.objects.filter(key="once").count() == 1
    # The same, at the statement: the answer names the finished job, deduped.
    db = DjangoDatabase("default")
    row = {
        "id": message.id,
        "run_id": message.run_id,
        "name": message.name,
        "queue": message.queue,
        "priority": message.priority,
        "input": json.dumps(message.input),
        "tenant_id": "acme",
        "idempotency_key": "once",
        "max_attempts": message.max_attempts,
        "run_at": message.run_at,
        "correlation_id": "",
        "enqueued_by": "",
        "concurrency_key": None,
    }
    [again] = publish(db, [JobRow.from_record(row)])
    assert again == Enqueued(answer.id, answer.run_id, deduped=True)
    assert Job.objects.count() == 1


def test_a_keyed_job_keeps_its_concurrency_key_through_the_outbox(jobs):
    """L2 over O1: the staged row carries the key the claim decides on, so the
    published row is limited from its first claim, exactly like a direct enqueue."""
    direct = per_account.enqueue(key="direct", account="acct-1")
    with transaction.atomic():
        staged = per_account.enqueue(key="staged", account="acct-1")
    assert OutboxMessage.objects.get().concurrency_key == keyed_lease_key(
        "testapp.per_account", "acct-1"
    )
    jobs.relay()
    keys = dict(Job.objects.values_list("id", "concurrency_key"))
    assert keys[staged.id] == keys[direct.id] == "job-key:testapp.per_account:acct-1"
