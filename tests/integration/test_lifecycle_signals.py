"""P4: beside job_enqueued / job_started / job_settled, ``job_attempt_failed`` fires once
per attempt that raised (after its outcome is written) and ``job_cancelled`` once per
job an operator verb cancelled."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.testapp.jobs import hold, noop
from tests.testapp.seed_jobs import chatter, refuses
from ultimate_jobs import JobNotCancellable, api
from ultimate_jobs.ground.signals import job_attempt_failed, job_cancelled, job_settled
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard():
    """Every job_attempt_failed / job_cancelled / job_settled, in order."""
    events: list[tuple[object, ...]] = []

    def failed(sender, **kw):
        state = Job.objects.get(pk=kw["job_id"]).state  # written before the signal
        events.append(
            (
                "failed",
                sender,
                kw["attempt"],
                str(kw["outcome"]),
                state,
                type(kw["error"]).__name__,
            )
        )

    def cancelled(sender, **kw):
        state = Job.objects.get(pk=kw["job_id"]).state
        events.append(
            ("cancelled", sender, kw["name"], kw["state"], state, kw["reason"])
        )

    def settled(sender, settled, **kw):
        events.append(("settled", sender, settled.attempt, str(settled.outcome)))

    job_attempt_failed.connect(failed, dispatch_uid="t-failed")
    job_cancelled.connect(cancelled, dispatch_uid="t-cancelled")
    job_settled.connect(settled, dispatch_uid="t-settled")
    yield events
    job_attempt_failed.disconnect(dispatch_uid="t-failed")
    job_cancelled.disconnect(dispatch_uid="t-cancelled")
    job_settled.disconnect(dispatch_uid="t-settled")


def test_job_attempt_failed_fires_per_failed_attempt_after_its_write(jobs, heard):
    chatter.enqueue(key="s1", lines=0, fail_times=2)
    jobs.run()
    jobs.travel(seconds=2)
    jobs.run()
    jobs.travel(seconds=3)
    jobs.run()
    assert heard == [
        ("failed", chatter, 1, "retried", "delayed", "ValueError"),
        ("failed", chatter, 2, "retried", "delayed", "ValueError"),
        ("settled", chatter, 3, "completed"),
    ]


def test_the_final_failed_attempt_is_told_to_both_signals(jobs, heard):
    refuses.enqueue(key="s2")
    jobs.run()
    assert heard == [
        ("failed", refuses, 1, "dead-lettered", "dead", "RuntimeError"),
        ("settled", refuses, 1, "dead-lettered"),
    ]


def test_job_cancelled_fires_once_per_cancel_from_every_verb(jobs, heard):
    one = noop.enqueue(key="c1")
    two = noop.using(delay="1h").enqueue(key="c2")
    three = hold.enqueue(key="c3")
    api.cancel(one.id, "not needed")
    call_command(
        "jobs", "cancel", "--name", "testapp.noop", "--key", "c2", "--reason", "by key"
    )
    api.bulk("cancel", state="ready", name="testapp.hold", reason="bulk")
    assert heard == [
        ("cancelled", noop, "testapp.noop", "ready", "cancelled", "not needed"),
        ("cancelled", noop, "testapp.noop", "delayed", "cancelled", "by key"),
        ("cancelled", hold, "testapp.hold", "ready", "cancelled", "bulk"),
    ]
    # A refused cancel (the job is finished) tells nobody.
    with pytest.raises(JobNotCancellable):
        api.cancel(one.id)
    assert api.cancel_by_key("testapp.noop", "c1") is None
    assert len(heard) == 3
    assert {three.id, two.id} <= set(
        Job.objects.filter(state="cancelled").values_list("id", flat=True)
    )
