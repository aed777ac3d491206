"""Operator verbs (P2): requeue, cancel, remove, promote, each refused with a clear error."""

from __future__ import annotations

import uuid

import pytest

from tests.testapp.jobs import noop, touch
from ultimate_jobs import (
    JobDuplicate,
    JobNotCancellable,
    JobNotFound,
    JobNotPromotable,
    JobNotRemovable,
    JobNotRequeueable,
    api,
)
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def test_a_live_job_is_not_requeueable(jobs):
    answer = noop.enqueue(key="live")
    with pytest.raises(JobNotRequeueable) as info:
        api.retry(answer.id)
    assert info.value.code == "X_JOB_NOT_REQUEUEABLE"


def test_requeue_is_refused_when_a_live_job_holds_the_key(jobs):
    first = touch.enqueue(key="k", tenant="t")
    jobs.run()
    touch.enqueue(key="k", tenant="t")  # a new live job takes the released key
    with pytest.raises(JobDuplicate):
        api.retry(first.id)
    assert Job.objects.get(pk=first.id).state == "done"


def test_unknown_ids_and_malformed_ids():
    with pytest.raises(JobNotFound):
        api.retry(uuid.uuid4())
    with pytest.raises(InvalidArgument) as info:
        api.cancel("not-a-uuid")
    assert info.value.field == "id"


def test_cancel_a_queued_job_then_it_is_not_cancellable(jobs):
    answer = noop.enqueue(key="c")
    api.cancel(answer.id, "no longer needed")
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.last_error) == ("cancelled", "no longer needed")
    assert jobs.run() == []
    with pytest.raises(JobNotCancellable):
        api.cancel(answer.id)
    api.retry(answer.id)  # a cancelled job is finished: requeueable
    assert Job.objects.get(pk=answer.id).state == "ready"


def test_remove_refuses_a_running_job(jobs):
    answer = noop.enqueue(key="r")
    Job.objects.filter(pk=answer.id).update(state="running")
    with pytest.raises(JobNotRemovable):
        api.remove(answer.id)
    Job.objects.filter(pk=answer.id).update(state="done")
    api.remove(answer.id)
    assert not Job.objects.filter(pk=answer.id).exists()


def test_promote_makes_a_delayed_job_due_now(jobs):
    answer = noop.using(delay="1d").enqueue(key="p")
    assert jobs.run() == []
    api.promote(answer.id)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    with pytest.raises(JobNotPromotable):
        api.promote(answer.id)


def test_get_answers_the_documented_json(jobs):
    answer = touch.enqueue(key="j", tenant="acme")
    data = api.get(answer.id)
    assert set(data) >= {
        "id",
        "run_id",
        "name",
        "queue",
        "state",
        "attempt",
        "max_attempts",
        "tenant_id",
        "idempotency_key",
        "input",
        "run_at",
        "created_at",
        "started_at",
        "finished_at",
        "last_error",
        "progress",
        "steps",
    }
    assert (data["id"], data["state"], data["tenant_id"]) == (
        str(answer.id),
        "ready",
        "acme",
    )
