"""Real worker processes (W1-W9): kill -9, SIGTERM drains, two workers racing,
a job that kills every worker it lands on, --processes and --max-jobs."""

from __future__ import annotations

import signal
import time

import pytest
from django.db.models.functions import Now

from tests.conftest import deadline, start_deadline, wait_for, wait_for_progress
from tests.testapp.jobs import atouch, crash, hold, touch
from tests.testapp.models import Record
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql.rows import Fence

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def state_of(job_id):
    return Job.objects.values_list("state", "attempt").get(pk=job_id)


def events(key):
    return list(
        Record.objects.filter(key=key)
        .order_by("id")
        .values_list("event", "attempt", "pid")
    )


def release(key):
    Record.objects.create(key=key, event="release")


def test_a_worker_runs_sync_and_async_jobs(start_worker):
    worker = start_worker("--concurrency", "2")
    sync = touch.enqueue(key="sync", tenant="acme")
    async_ = atouch.enqueue(key="async")
    wait_for(
        lambda: state_of(sync.id)[0] == "done" and state_of(async_.id)[0] == "done"
    )
    assert [e[0] for e in events("sync")] == ["ran"]
    assert [e[0] for e in events("async")] == ["ran-async"]
    assert {e[2] for e in events("sync") + events("async")} == {worker.pid}


def test_sigkill_mid_job_another_worker_reruns_it_and_the_late_writes_are_fenced(
    start_worker,
):
    answer = hold.enqueue(key="k9", seconds=120)
    first = start_worker("--concurrency", "1", LEASE="2s")
    wait_for(lambda: [e[0] for e in events("k9")] == ["started"])
    held = Job.objects.values("id", "lease_owner").get(pk=answer.id)
    assert held["lease_owner"] is not None
    stale = Fence(id=held["id"], lease_owner=held["lease_owner"])
    first.kill()
    release("k9")
    second = start_worker("--concurrency", "1", LEASE="2s")
    wait_for(lambda: state_of(answer.id)[0] == "done", timeout=deadline(lease=2))
    assert events("k9") == [
        ("started", 1, first.pid),
        ("release", 0, 0),
        ("started", 2, second.pid),
        ("finished", 2, second.pid),
    ]
    # The killed worker's late writes (its stale claim token) change nothing (W3).
    settler = Settler(DjangoDatabase("default"))
    assert settler.complete(stale) is False
    assert (
        settler.bury(
            stale, state="dead", error=RuntimeError("late"), stop_reason="terminal"
        )
        is False
    )
    assert state_of(answer.id) == ("done", 2)


def test_sigterm_mid_job_interrupts_the_body_and_the_next_worker_finishes_it(
    start_worker,
):
    answer = hold.enqueue(key="term", seconds=120)
    first = start_worker("--concurrency", "1")
    wait_for(lambda: [e[0] for e in events("term")] == ["started"])
    first.terminate()
    assert first.wait() == 0
    assert [e[0] for e in events("term")] == ["started", "cancelled:DRAINING"]
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner) == (
        "ready",
        0,
        None,
    )  # attempt uncounted
    assert "outcome=interrupted" in first.log()
    release("term")
    start_worker("--concurrency", "1")
    wait_for(lambda: state_of(answer.id)[0] == "done")
    assert state_of(answer.id) == ("done", 1)
    assert [e[:2] for e in events("term")][-2:] == [("started", 1), ("finished", 1)]


def test_a_body_that_ignores_its_token_is_abandoned_at_the_drain_deadline(start_worker):
    answer = hold.enqueue(key="stubborn", seconds=120, honour_cancel=False)
    worker = start_worker("--concurrency", "1", DRAIN_TIMEOUT="1s")
    wait_for(lambda: events("stubborn"))
    started = time.monotonic()
    worker.terminate()
    assert worker.wait() == 0
    # The body ignores its token for 120 s: an exit well before is the 1 s deadline.
    assert time.monotonic() - started < 60
    assert "jobs.worker.drain-abandoned" in worker.log()
    assert str(answer.id) in worker.log()
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner) == (
        "ready",
        1,
        None,
    )  # counted: the body ignored it


def test_a_second_signal_ends_the_drain_at_once(start_worker):
    answer = hold.enqueue(key="twice", seconds=120, honour_cancel=False)
    worker = start_worker("--concurrency", "1", DRAIN_TIMEOUT="60s")
    wait_for(lambda: events("twice"))
    worker.terminate()
    worker.wait_log("jobs.process.draining")
    started = time.monotonic()
    worker.signal(signal.SIGINT)
    assert worker.wait() == 0
    # DRAIN_TIMEOUT is 60 s: an exit well before it is the second signal.
    assert time.monotonic() - started < 30
    assert state_of(answer.id) == ("ready", 1)


def test_a_job_that_kills_every_worker_is_dead_lettered_after_its_attempts(
    start_worker,
):
    answer = crash.enqueue(key="boom")  # Retry(attempts=2)
    for attempt in (1, 2):
        worker = start_worker("--concurrency", "1", LEASE="1s")
        assert worker.wait() != 0  # the body SIGKILLed its own worker
        assert [e[:2] for e in events("boom")][-1] == ("attempt", attempt)
    third = start_worker("--concurrency", "1", LEASE="1s")
    wait_for(lambda: state_of(answer.id)[0] == "dead", timeout=deadline(lease=1))
    job = Job.objects.get(pk=answer.id)
    assert (job.attempt, job.last_error, job.stop_reason) == (
        2,
        "LEASE_LAPSED_FINAL_ATTEMPT",
        "attempts-exhausted",
    )
    assert [e[0] for e in events("boom")] == [
        "attempt",
        "attempt",
    ]  # never handed out a third time
    third.wait_log("jobs.claim.exhausted")


def test_two_workers_draining_5000_jobs_run_each_exactly_once(start_worker):
    touch.enqueue_many([{"key": f"j{i}", "tenant": "t"} for i in range(5000)])
    first = start_worker("--concurrency", "8")
    second = start_worker("--concurrency", "8")
    wait_for_progress(
        lambda: Job.objects.filter(state="done").count(),
        5000,
        message="5000 jobs done",
    )
    assert Record.objects.count() == 5000
    assert Record.objects.values("key").distinct().count() == 5000
    assert set(Record.objects.values_list("attempt", flat=True)) == {1}
    pids = set(Record.objects.values_list("pid", flat=True))
    assert pids == {first.pid, second.pid}


def test_max_jobs_drains_and_exits_after_n_jobs(start_worker):
    touch.enqueue_many([{"key": f"m{i}", "tenant": "t"} for i in range(5)])
    worker = start_worker("--concurrency", "1", "--max-jobs", "3")
    assert worker.wait() == 0
    assert Job.objects.filter(state="done").count() == 3
    assert Job.objects.filter(state="ready").count() == 2


def test_processes_supervises_children_and_restarts_one_that_dies(start_worker):
    supervisor = start_worker(
        "--concurrency", "2", "--processes", "2", wait_ready=False
    )
    wait_for(
        lambda: supervisor.log().count("jobs.worker.started") == 2,
        timeout=start_deadline(),
    )
    touch.enqueue_many([{"key": f"p{i}", "tenant": "t"} for i in range(40)])
    wait_for(lambda: Job.objects.filter(state="done").count() == 40)
    child = Record.objects.values_list("pid", flat=True).first()
    assert child is not None
    assert child != supervisor.pid
    import os

    os.kill(child, signal.SIGKILL)
    wait_for(
        lambda: supervisor.log().count("jobs.worker.started") == 3,
        timeout=start_deadline(),
    )
    touch.enqueue(key="after", tenant="t")
    wait_for(lambda: Job.objects.filter(state="done").count() == 41)
    supervisor.terminate()
    assert supervisor.wait() == 0
    assert "jobs.supervisor.stopped" in supervisor.log()


@pytest.mark.needs_session
def test_a_failed_release_at_the_drain_deadline_leaves_the_row_to_its_lease(
    start_worker, second_connection
):
    """W6, W5: at the drain deadline the worker hands back a body that ignored its
    token, but the release fails (its session was cut during the drain): it logs
    jobs.worker.release-failed and exits all the same; the row stays running under
    its old claim until the lease lapses, and then another worker runs it."""
    answer = hold.enqueue(key="unreleased", seconds=120, honour_cancel=False)
    worker = start_worker(
        "--concurrency", "1", "--worker-id", "unreleasing",
        DRAIN_TIMEOUT="5s", LEASE="2s",
    )  # fmt: skip
    wait_for(lambda: events("unreleased"), message="the body to start")
    claim = Job.objects.values_list("lease_owner", flat=True).get(pk=answer.id)
    worker.terminate()
    worker.wait_log("jobs.process.draining")
    cut = second_connection.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'ultimate_jobs worker unreleasing'"
    ).fetchall()
    assert cut  # the claim loop's session, which the drain's release uses
    assert worker.wait() == 0
    assert "jobs.worker.drain-abandoned" in worker.log()
    assert "jobs.worker.release-failed" in worker.log()
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner) == ("running", 1, claim)
    release("unreleased")
    start_worker("--concurrency", "1", LEASE="2s")
    wait_for(
        lambda: state_of(answer.id) == ("done", 2),
        timeout=deadline(lease=2),
        message="the lapsed claim run again by the next worker",
    )
    assert [e[:2] for e in events("unreleased")] == [
        ("started", 1),
        ("release", 0),
        ("started", 2),
        ("finished", 2),
    ]


def test_a_rolling_deploy_leaves_a_job_the_old_worker_lacks_to_the_new_one(
    start_worker, monkeypatch
):
    """W2, issue 16 item 7: a worker claims only the job names it declares. A row of a
    job only the next deploy declares stays ready with its attempts untouched while an
    old worker serves the queue, and the new deploy's worker runs it."""
    old = start_worker("--concurrency", "2")
    # The test process is an old deploy too: the row is written delayed, renamed, then
    # made due, so no worker sees it under the old name.
    pending = touch.using(delay="1h").enqueue(key="next", tenant="t")
    Job.objects.filter(pk=pending.id).update(name="testapp.next_deploy")
    Job.objects.filter(pk=pending.id).update(state="ready", run_at=Now())
    # A later job of the same queue: once it is done, the old worker has claimed past
    # the older row (claims go in priority, then age order).
    later = touch.enqueue(key="later", tenant="t")
    wait_for(lambda: state_of(later.id)[0] == "done")
    assert [e[2] for e in events("later")] == [old.pid]
    assert state_of(pending.id) == ("ready", 0)
    assert events("next") == []

    monkeypatch.setenv("UJ_TEST_NEXT_DEPLOY", "1")
    new = start_worker("--concurrency", "2")
    wait_for(lambda: state_of(pending.id)[0] == "done")
    assert state_of(pending.id) == ("done", 1)
    assert events("next") == [("ran-next-deploy", 1, new.pid)]
