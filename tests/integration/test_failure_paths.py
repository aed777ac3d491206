"""Failure paths inside one process, on real PostgreSQL: an on_settled hook that keeps
raising (P4), a relay pass that fails and re-arms (O2), an operator's cancel reaching
a running body at the worker's next heartbeat (P2, W4).

The relay's faults are injected at its Database seam (``FailingPublish``): every
other statement runs for real, on its own connection."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, TypeVar

import pytest
from django.db import transaction

from tests.conftest import deadline, wait_for
from tests.testapp import jobs as testjobs
from tests.testapp.jobs import hold, hooked, noop
from tests.testapp.models import Record
from ultimate_jobs import api
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.ground.signals import job_settled
from ultimate_jobs.models import Job, OutboxMessage
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.relay import Relay
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.sql import Query

R = TypeVar("R")


def logged(caplog, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == event]


@pytest.mark.django_db
def test_an_on_settled_hook_that_raises_is_tried_3_times_then_logged(jobs, caplog):
    """P4: three tries in-process, then jobs.on-settled.failed with
    X_JOB_ON_SETTLED_FAILED; the settled row is left as it is and job_settled still
    fires once."""
    testjobs.hook_calls.clear()
    signalled: list[str] = []

    def receiver(sender, settled, **kwargs):
        signalled.append(str(settled.outcome))

    job_settled.connect(receiver, sender=hooked)
    try:
        answer = hooked.enqueue(key="h")
        with caplog.at_level(logging.INFO, logger="ultimate_jobs"):
            [attempt] = jobs.run()
    finally:
        job_settled.disconnect(receiver, sender=hooked)
    assert str(attempt.outcome) == "completed"
    assert testjobs.hook_calls == ["completed"] * 3
    assert signalled == ["completed"]
    [failure] = logged(caplog, "jobs.on-settled.failed")
    assert failure.levelno == logging.ERROR
    assert failure.error_code == "X_JOB_ON_SETTLED_FAILED"  # type: ignore[attr-defined]
    assert failure.job_id == str(answer.id)  # type: ignore[attr-defined]
    assert "the notification service is down" in failure.error  # type: ignore[attr-defined]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.last_error, job.error_code) == (
        "done",
        1,
        "",
        "",
    )
    assert list(Record.objects.values_list("event", flat=True)) == ["ran"]


class FailingPublish:
    """The real database, except that the first ``times`` publishes (job_enqueue)
    fail as a dropped connection would."""

    def __init__(self, times: int) -> None:
        self.db = DirectDatabase("default", application_name="test relay")
        self.times = times
        self.failed = 0

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        if query.name == "job_enqueue" and self.failed < self.times:
            self.failed += 1
            raise QueryError(query.name, "server closed the connection unexpectedly")
        return self.db.run(query, **params)


@pytest.mark.django_db(transaction=True)
def test_a_relay_pass_that_fails_is_logged_and_the_loop_re_arms(caplog):
    """O2, O3: a failed publish hands the batch back at once and raises; the loop logs
    jobs.outbox.tick-failed, waits a growing pause and passes again, and the rows
    are published once, well before their 30 s claim lease could lapse."""
    with transaction.atomic():
        staged = noop.enqueue_many([{"key": f"r{i}"} for i in range(10)])
    db = FailingPublish(times=2)
    lifecycle = Lifecycle()
    relay = Relay(
        settings=load_settings({"RELAY_INTERVAL": "50ms"}),
        lifecycle=lifecycle,
        relay_id="flaky",
        db=db,
    )
    thread = threading.Thread(target=relay.run)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="ultimate_jobs"):
        thread.start()
        try:
            wait_for(
                lambda: not OutboxMessage.objects.filter(published_at=None).exists(),
                timeout=deadline(lease=0),
                message="the rows published after two failed passes",
            )
        finally:
            lifecycle.stop()
            thread.join(deadline(lease=0))
            db.db.close()
    assert time.monotonic() - started < 30  # released at once, not at the lease
    assert db.failed == 2
    ticks = logged(caplog, "jobs.outbox.tick-failed")
    assert [r.retry_in for r in ticks] == [0.1, 0.2]  # type: ignore[attr-defined]
    assert all("server closed" in r.error for r in ticks)  # type: ignore[attr-defined]
    assert [r.released for r in logged(caplog, "jobs.outbox.publish-failed")] == [  # type: ignore[attr-defined]
        10,
        10,
    ]
    assert set(OutboxMessage.objects.values_list("claims", flat=True)) == {3}
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted(
        s.id for s in staged
    )


@pytest.mark.django_db(transaction=True)
def test_a_cancel_reaches_a_running_body_at_the_next_heartbeat(caplog):
    """P2, W4: the row is cancelled at once; the worker learns it from its next
    renewal (which no longer matches), cancels the run's token with CANCELLED, and
    the body's late settle matches nothing: the row stays cancelled."""
    heartbeat = 0.5
    settings = load_settings({"LEASE": "3s", "HEARTBEAT": heartbeat})
    lifecycle = Lifecycle()
    worker = Worker(
        queues=["default"], concurrency=1, settings=settings, lifecycle=lifecycle
    )
    thread = threading.Thread(target=worker.run)
    answer = hold.enqueue(key="cx", seconds=120)
    with caplog.at_level(logging.INFO, logger="ultimate_jobs"):
        thread.start()
        try:
            wait_for(
                lambda: Record.objects.filter(key="cx", event="started").exists(),
                message="the body to start",
            )
            api.cancel(answer.id, reason="not needed any more")
            cancelled = time.monotonic()
            assert Job.objects.get(pk=answer.id).state == "cancelled"  # at once
            wait_for(
                lambda: Record.objects.filter(
                    key="cx", event="cancelled:CANCELLED"
                ).exists(),
                timeout=deadline(lease=0, poll=heartbeat),
                message="the body to see its token cancelled",
            )
            reached = time.monotonic() - cancelled
        finally:
            lifecycle.stop()
            thread.join(deadline(lease=0))
    [seen] = logged(caplog, "jobs.run.cancelled")
    assert seen.job_id == str(answer.id)  # type: ignore[attr-defined]
    # Not at once, and not after a lease: at the next renewal (a busy machine's
    # scheduling on top).
    assert reached < settings.LEASE
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.stop_reason, job.last_error) == (
        "cancelled",
        "cancelled",
        "not needed any more",
    )
    assert job.lease_owner is None
    assert list(Record.objects.filter(key="cx").values_list("event", flat=True)) == [
        "started",
        "cancelled:CANCELLED",
    ]
    assert worker.stats.outcomes.get("completed", 0) == 0
