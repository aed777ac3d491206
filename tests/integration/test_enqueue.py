"""Enqueue (H1-H3, J1-J3): what lands in the table, dedupe on live keys, refusals."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.testapp.jobs import flaky, noop, touch, typed
from ultimate_jobs import (
    Enqueued,
    InvalidArgument,
    InvalidJobPayload,
    InvalidQueueName,
    JobDuplicate,
    JobTenantRequired,
    correlation_scope,
)
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def test_enqueue_writes_one_ready_row_and_answers_its_ids():
    answer = touch.enqueue(key="a", tenant="acme")
    assert isinstance(answer, Enqueued)
    assert not answer.deduped
    job = Job.objects.get()
    assert (job.id, job.run_id) == (answer.id, answer.run_id)
    assert job.id.version == 7
    assert (job.name, job.queue, job.state, job.attempt) == (
        "testapp.touch",
        "default",
        "ready",
        0,
    )
    assert job.input == {"key": "a", "tenant": "acme"}
    assert job.tenant_id == "acme"
    assert job.idempotency_key == "a"
    assert job.max_attempts == 5


def test_a_live_key_dedupes_to_the_same_ids():
    first = touch.enqueue(key="same", tenant="acme")
    second = touch.enqueue(key="same", tenant="acme")
    assert second == Enqueued(first.id, first.run_id, deduped=True)
    assert Job.objects.count() == 1


def test_the_key_is_per_tenant():
    a = touch.enqueue(key="same", tenant="acme")
    b = touch.enqueue(key="same", tenant="globex")
    assert a.id != b.id
    assert not b.deduped


def test_a_finished_job_releases_its_key(jobs):
    first = touch.enqueue(key="again", tenant="t")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    second = touch.enqueue(key="again", tenant="t")
    assert not second.deduped
    assert second.id != first.id


def test_on_conflict_error_raises_and_writes_nothing():
    first = touch.enqueue(key="held", tenant="t")
    with pytest.raises(JobDuplicate) as info:
        touch.using(on_conflict="error").enqueue(key="held", tenant="t")
    assert info.value.existing_id == first.id
    assert info.value.code == "X_JOB_DUPLICATE"
    assert Job.objects.count() == 1


def test_bad_input_is_refused_and_writes_no_row():
    with pytest.raises(InvalidJobPayload) as info:
        typed.enqueue(key="k", count="three")
    assert (info.value.field, info.value.value) == ("count", "three")
    with pytest.raises(InvalidJobPayload):
        typed.enqueue(key="k", count=1, colour="red")
    with pytest.raises(InvalidJobPayload):
        typed.enqueue(key="k")
    assert Job.objects.count() == 0


def test_enqueue_many_is_one_answer_per_input_in_order_with_in_batch_dedupe():
    answers = noop.enqueue_many(
        [{"key": "1"}, {"key": "2"}, {"key": "1"}, {"key": "3"}]
    )
    assert [a.deduped for a in answers] == [False, False, True, False]
    assert answers[2].id == answers[0].id
    assert Job.objects.count() == 3
    assert [
        str(k)
        for k in Job.objects.order_by("id").values_list("idempotency_key", flat=True)
    ] == ["1", "2", "3"]


def test_enqueue_many_dedupes_against_live_rows_and_refuses_bad_batches_whole():
    held = noop.enqueue(key="x")
    answers = noop.enqueue_many([{"key": "x"}, {"key": "y"}])
    assert answers[0] == Enqueued(held.id, held.run_id, deduped=True)
    with pytest.raises(InvalidJobPayload):
        noop.enqueue_many([{"key": "z"}, {"key": 5}])
    with pytest.raises(JobDuplicate):
        noop.enqueue_many([{"key": "w"}, {"key": "x"}], on_conflict="error")
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == ["x", "y"]


def test_enqueue_many_uses_a_fixed_number_of_parameters(django_assert_num_queries):
    with django_assert_num_queries(1):
        answers = noop.enqueue_many([{"key": str(i)} for i in range(5000)])
    assert len(answers) == 5000
    assert Job.objects.count() == 5000


def test_options_delay_run_at_queue_priority_run_id():
    run_id = uuid.uuid4()
    delayed = noop.using(delay="1h", queue="slow", priority=7, run_id=run_id).enqueue(
        key="d"
    )
    job = Job.objects.get(pk=delayed.id)
    assert (job.state, job.queue, job.priority, job.run_id) == (
        "delayed",
        "slow",
        7,
        run_id,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (now,) = cursor.fetchone()
    assert job.run_at - now == timedelta(hours=1)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    scheduled = noop.using(run_at=at).enqueue(key="s")
    assert Job.objects.get(pk=scheduled.id).run_at == at
    past = noop.using(run_at=datetime(2000, 1, 1, tzinfo=UTC)).enqueue(key="p")
    assert Job.objects.get(pk=past.id).state == "ready"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"delay": "soon"}, "delay"),
        ({"run_at": datetime(2030, 1, 1)}, "run_at"),  # naive
        ({"priority": 500}, "priority"),
        ({"on_conflict": "replace"}, "on_conflict"),
        ({"run_id": "not-a-uuid"}, "run_id"),
        ({"retries": 3}, "retries"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options, field):
    with pytest.raises(InvalidArgument) as info:
        noop.using(**options)
    assert info.value.field == field


def test_a_bad_queue_name_is_refused():
    with pytest.raises(InvalidQueueName):
        noop.using(queue="Bad Queue")


def test_tenant_from_the_input_or_the_actor():
    class Actor:
        pk = 42
        tenant_id = "from-actor"

    answer = touch.using(actor=Actor()).enqueue(key="a")
    job = Job.objects.get(pk=answer.id)
    assert (job.tenant_id, job.enqueued_by) == ("from-actor", "42")
    with pytest.raises(JobTenantRequired):
        touch.enqueue(
            key="b"
        )  # the tenant function reads none and no actor carries one
    assert Job.objects.count() == 1


def test_the_correlation_id_of_the_enqueue_site_is_recorded():
    with correlation_scope("req-123"):
        answer = noop.enqueue(key="c")
    assert Job.objects.get(pk=answer.id).correlation_id == "req-123"


def test_retry_policy_sets_max_attempts():
    answer = flaky.enqueue(key="f", fail_times=0)
    assert Job.objects.get(pk=answer.id).max_attempts == 4
