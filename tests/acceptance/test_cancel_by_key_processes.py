"""Cancel by key (seed cancelByKey, P2) against a real worker process: a keyed job is
disarmed wherever it is (ready, delayed by its own reschedule, suspended, running: at
its next heartbeat), and none of them runs again. Also: the lines a body logs through
run.logger in a real worker are kept with its attempt (seed logMaxEntries)."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.testapp.durable_jobs import nap, recover_cart
from tests.testapp.jobs import hold, touch
from tests.testapp.models import Record
from tests.testapp.seed_jobs import chatter
from ultimate_jobs import api
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LEASE = 3.0  # seconds; the heartbeat renews (and notices a cancel) every LEASE / 3


def events(key):
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def row(job_id):
    return Job.objects.values_list("state", "attempt").get(pk=job_id)


def test_cancel_by_key_disarms_a_keyed_job_in_each_live_state(start_worker):
    worker = start_worker("--concurrency", "2", LEASE=f"{LEASE:g}s")

    running = hold.enqueue(key="cbk-running", seconds=120)
    wait_for(
        lambda: events("cbk-running") == ["started"], message="the hold body to start"
    )
    suspended = nap.enqueue(key="cbk-suspended", seconds=4)
    wait_for(lambda: row(suspended.id)[0] == "suspended", message="the nap to suspend")
    cart = recover_cart.enqueue(key="cbk-cart")  # reschedules its next stage in 1 h
    wait_for(
        lambda: row(cart.id)[0] == "delayed" and events("cbk-cart") == ["remind:1"],
        message="the cart's first stage to reschedule the next",
    )
    api.pause_queue("default")  # the worker claims nothing more from it
    ready = touch.enqueue(key="cbk-ready", tenant="acme")
    assert row(ready.id) == ("ready", 0)

    assert api.cancel_by_key(hold, "cbk-running") == running.id
    assert api.cancel_by_key(nap, "cbk-suspended") == suspended.id
    assert api.cancel_by_key(recover_cart, "cbk-cart") == cart.id
    assert api.cancel_by_key(touch, "cbk-ready", tenant="acme") == ready.id
    for answer in (running, suspended, cart, ready):
        assert row(answer.id)[0] == "cancelled"

    # The running body learns it at the worker's next heartbeat (LEASE / 3).
    wait_for(
        lambda: "cancelled:CANCELLED" in events("cbk-running"),
        timeout=3 * LEASE,
        message="the worker's heartbeat to cancel the running body's token",
    )
    worker.wait_log("jobs.run.cancelled")

    # A sentinel due after the nap would have woken and after the ready job: once it
    # has run, the worker has passed both moments and claimed neither.
    api.resume_queue("default")
    sentinel = touch.using(delay="5s").enqueue(key="cbk-sentinel", tenant="acme")
    wait_for(
        lambda: row(sentinel.id)[0] == "done",
        timeout=30,
        message="the sentinel due after the nap's wake time to run",
    )
    assert events("cbk-ready") == []
    assert events("cbk-suspended") == ["before"]
    assert events("cbk-cart") == ["remind:1"]
    assert events("cbk-running") == ["started", "cancelled:CANCELLED"]
    assert [row(a.id) for a in (running, suspended, cart, ready)] == [
        ("cancelled", 1),
        ("cancelled", 0),  # a suspended run spent no attempt (S3)
        ("cancelled", 0),  # a new stage starts with a fresh budget (S5)
        ("cancelled", 0),
    ]


def test_a_real_worker_keeps_the_lines_an_attempt_logged(start_worker):
    start_worker("--concurrency", "1")
    answer = chatter.enqueue(key="logs-worker", lines=3)
    wait_for(lambda: row(answer.id)[0] == "done", message="the chatter job to finish")
    [group] = api.get(answer.id)["logs"]
    assert group["attempt"] == 1
    assert [(e["level"], e["message"]) for e in group["entries"]] == [
        ("INFO", "line 0 of attempt 1"),
        ("INFO", "line 1 of attempt 1"),
        ("INFO", "line 2 of attempt 1"),
    ]
