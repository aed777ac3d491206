"""The event bus and wait_for_event through the real SQL (S4), driven by the testing
runner: matching, ignoring, timing out, the one clock, retention, the wake."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections

from tests import claiming
from tests.conftest import wait_for
from tests.testapp.durable_jobs import (
    await_payment,
    await_tenant_event,
    await_twice,
    events,
)
from ultimate_jobs import (
    NO_TENANT,
    EventTimeout,
    InvalidArgument,
    JobTimeout,
    api,
    publish_event,
)
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.durable.events import purge_expired_events
from ultimate_jobs.models import Event, Job, JobStep
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.testing.factories import EventFactory

pytestmark = pytest.mark.django_db


def outcomes(jobs):
    return [str(a.outcome) for a in jobs.run()]


def test_a_wait_ignores_events_that_do_not_match_and_answers_the_one_that_does(jobs):
    answer = await_payment.enqueue(key="w", order="o-1")
    assert outcomes(jobs) == ["suspended"]
    assert publish_event("order.paid", {"order": "o-2", "amount": 1}).woken == 0
    assert publish_event("order.refunded", {"order": "o-1", "amount": 2}).woken == 0
    publish_event("order.paid", {"order": "o-1", "amount": 3}, tenant="acme")
    assert outcomes(jobs) == []  # nothing woke it: still suspended
    assert Job.objects.get(pk=answer.id).state == "suspended"
    published = publish_event("order.paid", {"order": "o-1", "amount": 4, "by": "card"})
    assert published.woken == 1
    # The matching publication made the suspended job due at once.
    job = Job.objects.get(pk=answer.id)
    assert job.run_at <= jobs.now()
    assert outcomes(jobs) == ["completed"]
    assert events("w") == ["asked", "asked", "paid:4"]
    [step] = JobStep.objects.filter(job_id=answer.id)
    assert (step.status, (step.output or {})["amount"], step.event_id) == (
        "done",
        4,
        published.id,
    )
    assert Job.objects.get(pk=answer.id).attempt == 1  # the suspension spent none


def test_an_answer_published_before_the_body_reached_its_wait_is_not_lost(jobs):
    await_payment.enqueue(key="early", order="o-9")
    publish_event("order.paid", {"order": "o-9", "amount": 7})
    assert outcomes(jobs) == ["completed"]
    assert events("early") == ["asked", "paid:7"]


def test_an_event_published_before_the_job_was_enqueued_does_not_count(jobs):
    EventFactory.create(  # published an hour before the enqueue
        name="order.paid",
        payload={"order": "o-8", "amount": 1},
        published_at=jobs.now() - timedelta(hours=1),
    )
    await_payment.enqueue(key="old", order="o-8")
    assert outcomes(jobs) == ["suspended"]


def test_a_wait_times_out_cleanly(jobs):
    """S4: past the timeout the wait raises EventTimeout (a JobTimeout), recorded with
    the step, so the job is dead-lettered at once rather than retried into the same
    answer; with timeout_ok the wait answers None."""
    failing = await_payment.enqueue(key="late", order="o-3", timeout=3600)
    tolerant = await_payment.enqueue(
        key="ok", order="o-4", timeout=3600, timeout_ok=True
    )
    assert outcomes(jobs) == ["suspended", "suspended"]
    jobs.travel(minutes=59)
    assert outcomes(jobs) == []  # the deadline is when the run wakes to check
    jobs.travel(minutes=1, seconds=1)
    attempts = {a.job_id: a for a in jobs.run()}
    dead = attempts[failing.id]
    assert dead.outcome == "dead-lettered"
    assert isinstance(dead.error, EventTimeout)
    assert isinstance(dead.error, JobTimeout)
    job = Job.objects.get(pk=failing.id)
    assert (job.state, job.error_code, job.stop_reason, job.attempt) == (
        "dead",
        "X_JOB_TIMEOUT",
        "terminal",
        1,
    )
    assert attempts[tolerant.id].outcome == "completed"
    assert events("ok") == ["asked", "asked", "paid:None"]
    assert JobStep.objects.get(job_id=tolerant.id).status == "timed_out"
    # A publication after the timeout changes nothing: the answer is recorded.
    publish_event("order.paid", {"order": "o-4", "amount": 1})
    assert outcomes(jobs) == []


def test_a_worker_clock_running_ahead_still_matches_an_event_published_after_it_asked(
    jobs,
):
    """S4, one clock: the runner's clock (the worker's) is an hour ahead of the
    database's when the job asks; the event, stamped by the database after that, still
    matches, and the hour-long timeout is not declared early."""
    answer = await_payment.enqueue(key="skew", order="o-5", timeout=7200)
    jobs.travel(hours=1)  # the worker's clock runs ahead of the database
    assert outcomes(jobs) == ["suspended"]
    asked = JobStep.objects.get(job_id=answer.id)
    publish_event("order.paid", {"order": "o-5", "amount": 5})
    published = Event.objects.get()
    assert asked.started_at is not None
    assert published.published_at < asked.started_at  # stamped by the database's clock
    assert outcomes(jobs) == ["completed"]
    assert events("skew") == ["asked", "asked", "paid:5"]


def test_waits_see_their_own_tenant_only(jobs):
    answer = await_tenant_event.enqueue(key="t", tenant="acme")
    assert outcomes(jobs) == ["suspended"]
    publish_event("contract.signed", {"by": "other"}, tenant="globex")
    publish_event("contract.signed", {"by": "nobody"}, tenant=NO_TENANT)
    assert outcomes(jobs) == []
    assert publish_event("contract.signed", {"by": "ann"}, tenant="acme").woken == 1
    assert outcomes(jobs) == ["completed"]
    assert events("t") == ["signed:ann"]
    assert Job.objects.get(pk=answer.id).state == "done"


def test_publish_event_defaults_to_the_current_tenant(jobs):
    from ultimate_jobs.ground.context import tenant_scope

    await_tenant_event.enqueue(key="ct", tenant="acme")
    jobs.run()
    with tenant_scope("acme"):
        assert publish_event("contract.signed", {"by": "ctx"}).woken == 1
    assert outcomes(jobs) == ["completed"]


def test_two_waits_of_one_run_consume_two_events_and_other_jobs_see_them_too(jobs):
    first = await_twice.enqueue(key="a")
    second = await_twice.enqueue(key="b")
    publish_event("ping", {"n": 1})
    assert outcomes(jobs) == ["suspended", "suspended"]
    publish_event("ping", {"n": 2})
    assert sorted(outcomes(jobs)) == ["completed", "completed"]
    assert events("a") == ["got:1,2"]
    assert events("b") == ["got:1,2"]
    assert {Job.objects.get(pk=j.id).state for j in (first, second)} == {"done"}


def test_expired_events_match_nothing_and_are_purged(jobs):
    publish_event("order.paid", {"order": "o-6", "amount": 1}, retention="1h")
    answer = await_payment.enqueue(key="exp", order="o-6")
    jobs.travel(hours=2)
    assert outcomes(jobs) == ["suspended"]
    assert Job.objects.get(pk=answer.id).state == "suspended"
    assert purge_expired_events(now=jobs.now()) == 1
    assert Event.objects.count() == 0


def test_reset_events_is_the_seam_between_tests(jobs):
    publish_event("order.paid", {"order": "o-7", "amount": 1})
    assert jobs.reset_events() == 1
    await_payment.enqueue(key="reset", order="o-7")
    assert outcomes(jobs) == ["suspended"]


def test_a_publication_racing_the_suspension_makes_the_job_due_at_once(jobs):
    """S4: a publication that flagged a wait while its run was still running (so it
    could not wake a suspended row) makes the suspension due at once, not at the
    next event_poll."""
    answer = await_payment.enqueue(key="race", order="o-10")
    assert outcomes(jobs) == ["suspended"]
    db = DjangoDatabase("default")
    # Claim it again, as a worker whose replay reached the wait and found nothing yet.
    api.promote(answer.id)
    [claimed] = claiming.claim(
        db,
        queues=["default"],
        limit=1,
        worker_id="w",
        lease_seconds=30,
        names=None,
        now=jobs.now(),
    )
    # The publication lands now: the row is 'running', so only the step is flagged.
    assert publish_event("order.paid", {"order": "o-10", "amount": 1}).woken == 0
    assert JobStep.objects.get(job_id=answer.id).woken
    [parked] = db.run(
        QUERIES["job_suspend"],
        id=answer.id,
        lease_owner=claimed["lease_owner"],
        step="paid",
        wake_at=None,
        poll=3600.0,
        progress=None,
        now=jobs.now(),
    )
    assert parked["due_in"] == 0
    assert not JobStep.objects.get(job_id=answer.id).woken  # re-armed
    assert outcomes(jobs) == ["completed"]


def test_bad_input_is_refused_and_writes_nothing(jobs):
    with pytest.raises(InvalidArgument, match="event"):
        publish_event("", {"a": 1})
    with pytest.raises(InvalidArgument, match="payload"):
        publish_event("x", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="payload"):
        publish_event("x", {"when": object()})
    with pytest.raises(InvalidArgument, match="tenant"):
        publish_event("x", {}, tenant="")
    with pytest.raises(InvalidArgument, match="retention"):
        publish_event("x", {}, retention="-1s")
    assert Event.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_suspension_committing_while_a_publication_runs_is_woken(
    jobs, second_connection
):
    """S4, the other order: the suspension locks its wait first and commits while the
    publication is blocked on that lock; the publication's own snapshot still sees the
    job running, so its follow-up statement (a fresh snapshot) wakes it."""
    answer = await_payment.enqueue(key="race2", order="o-11")
    assert outcomes(jobs) == ["suspended"]
    api.promote(answer.id)
    [claimed] = claiming.claim(
        DjangoDatabase("default"),
        queues=["default"],
        limit=1,
        worker_id="w",
        lease_seconds=30,
        names=None,
        now=None,
    )
    second_connection.execute("BEGIN")
    second_connection.execute(
        QUERIES["job_suspend"].text,
        {
            "id": answer.id,
            "lease_owner": claimed["lease_owner"],
            "step": "paid",
            "wake_at": None,
            "poll": 3600.0,
            "progress": None,
            "now": None,
        },
    )
    published = []

    def publish():
        try:
            published.append(
                publish_event("order.paid", {"order": "o-11", "amount": 2})
            )
        finally:
            connections.close_all()

    thread = threading.Thread(target=publish)
    thread.start()

    def publication_blocked():
        with connection.cursor() as cursor:  # not in a transaction: fresh statistics
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                "current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0] > 0

    wait_for(publication_blocked, timeout=10)
    second_connection.execute("COMMIT")
    thread.join(10)
    assert published[0].woken == 1
    job = Job.objects.get(pk=answer.id)
    assert job.state == "suspended"
    assert job.run_at <= datetime.now(UTC)  # due now, not in an hour


@pytest.mark.django_db(transaction=True)
def test_a_wait_recorded_while_a_publication_is_uncommitted_is_woken(
    jobs, second_connection
):
    """S4: the publication's first statement ran before the wait existed, and the
    wait's first look could not see the uncommitted event; the publication's second
    statement (a fresh snapshot, same transaction) flags and wakes it."""
    answer = await_payment.enqueue(key="race3", order="o-12")
    second_connection.execute("BEGIN")
    [published] = second_connection.execute(
        QUERIES["event_publish"].text,
        {
            "name": "order.paid",
            "payload": '{"order": "o-12", "amount": 3}',
            "tenant_id": None,
            "retention": 3600.0,
            "now": None,
        },
    ).fetchall()
    assert outcomes(jobs) == ["suspended"]  # the wait looked and found nothing yet
    assert Job.objects.get(pk=answer.id).run_at > datetime.now(UTC)
    [(woken, _)] = second_connection.execute(
        QUERIES["event_wake"].text, {"id": published[0], "now": None}
    ).fetchall()
    second_connection.execute("COMMIT")
    assert woken == 1
    assert outcomes(jobs) == ["completed"]
    assert events("race3") == ["asked", "asked", "paid:3"]
