"""An idle worker's poll carries its process's other roles (C3, O2, O5, N2, issue 26):
the scheduler's leader lease renews in the poll while it comes on time, and the
scheduler renews on its own, before it would stop firing, when the polls stop; the
poll looks at the outbox for an idle relay and wakes it when a row waits, so a row
whose NOTIFY was lost is published within the poll's bound."""

from __future__ import annotations

import itertools
import threading
import time
import types
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction

from tests.claiming import Counting
from tests.testapp.jobs import noop
from ultimate_jobs.conf import load_settings
from ultimate_jobs.models import LeaderLease, OutboxMessage
from ultimate_jobs.runtime import claimer as claimer_module
from ultimate_jobs.runtime import heartbeat as heartbeat_module
from ultimate_jobs.runtime import rides as rides_module
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.relay import Relay
from ultimate_jobs.runtime.rides import Rides
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.scheduling import scheduler as scheduler_module
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.scheduling.tasks import TaskRegistry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def process(monkeypatch):
    """A worker (wake proven) and a scheduler of one process, on counting connections
    and one fake monotonic clock; the scheduler leads."""
    clock = [1000.0]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0])
    for module in (heartbeat_module, claimer_module, rides_module, scheduler_module):
        monkeypatch.setattr(module, "time", fake)
    settings = load_settings({})
    rides = Rides()
    worker = Worker(settings=settings, queues=["default"], concurrency=4, rides=rides)
    worker.idle_ceiling = lambda: settings.WOKEN_IDLE_POLL_MAX  # type: ignore[method-assign]
    sent: list[str] = []
    poll_db, beat_db, lead_db = (Counting("default", sent) for _ in range(3))
    worker.claimer.db = poll_db
    worker.heartbeat.run_once(beat_db)
    scheduler = Scheduler(
        settings=settings,
        task_registry=TaskRegistry(),
        db=lead_db,
        holder="leader-1",
        rides=rides,
    )
    scheduler.run_once()
    assert scheduler.leading
    worker.run_once()
    sent.clear()
    yield types.SimpleNamespace(
        worker=worker, scheduler=scheduler, clock=clock, sent=sent, settings=settings
    )
    for db in (poll_db, beat_db, lead_db):
        db.close()


def _lease() -> LeaderLease:
    return LeaderLease.objects.get(role="scheduler")


def test_an_idle_minute_of_worker_and_scheduler_sends_only_the_polls(process):
    """Polls every 5 s, scheduler rounds every second: 12 statements a minute, all
    staging passes; the lease is renewed by them at least every third of the TTL and
    the leader never stops leading. Before issue 26 the scheduler added its own
    leader_acquire every 10 s (18 a minute)."""
    worker, scheduler, settings = process.worker, process.scheduler, process.settings
    lead = scheduler.leadership
    ttl, poll = settings.SCHEDULER_LEASE, settings.WOKEN_IDLE_POLL_MAX
    renewed = [_lease().renewed_at]
    renewals = [lead._sent]
    start = process.clock[0]
    for second in range(1, 61):
        process.clock[0] = start + second
        if second % int(poll) == 0:
            assert worker.run_once() == 0
            if lead._sent != renewals[-1]:
                renewals.append(lead._sent)
                renewed.append(_lease().renewed_at)
        assert scheduler.run_once() == []
        assert lead.is_leading(process.clock[0])
    assert Counter(process.sent) == {"job_stage": 12}
    gaps = [b - a for a, b in itertools.pairwise(renewals)]
    assert len(renewals) == 7 and all(gap <= ttl / 3 for gap in gaps)
    assert renewed == sorted(renewed) and len(set(renewed)) == 7  # in the database
    row = _lease()
    assert (row.holder, row.term) == ("leader-1", 1)
    assert row.expires_at - row.renewed_at == timedelta(
        seconds=settings.SCHEDULER_LEASE
    )


def test_when_the_polls_stop_the_scheduler_renews_before_it_would_stop_firing(process):
    """A worker busy with every slot taken polls no more: the leader renews on its own
    `grace` (the poll ceiling, at most half a third of the TTL) after the renewal
    fell due, at 15 s of a 30 s lease, before it stops firing at 20 s (C3)."""
    worker, scheduler, settings = process.worker, process.scheduler, process.settings
    lead = scheduler.leadership
    start = process.clock[0]
    for second in range(1, 21):  # 20 s of on-time polls
        process.clock[0] = start + second
        if second % 5 == 0:
            worker.run_once()
        scheduler.run_once()
    assert "leader_acquire" not in process.sent
    last = lead._sent  # the last renewal a poll carried
    process.sent.clear()
    own: list[float] = []
    second = 20
    while process.clock[0] < last + settings.SCHEDULER_LEASE:  # no poll from here on
        second += 1
        process.clock[0] = start + second
        scheduler.run_once()
        assert lead.is_leading(process.clock[0])  # never a gap in leadership
        if process.sent[len(own) :]:
            own.append(process.clock[0])
    ttl = settings.SCHEDULER_LEASE
    grace = min(settings.WOKEN_IDLE_POLL_MAX, ttl / 6)
    assert own[0] == last + ttl / 3 + grace  # 15 s after the carried renewal
    assert own[0] < last + ttl * 2 / 3  # before it would stop firing
    assert set(process.sent) == {"leader_acquire"}
    assert (_lease().holder, _lease().term) == ("leader-1", 1)


def test_a_lease_that_changed_hands_is_not_renewed_by_the_poll(process):
    """The carried renewal is fenced on the holder: a lease another holder took is
    left alone, and the scheduler asks at once on its own (C3)."""
    worker, scheduler, settings = process.worker, process.scheduler, process.settings
    LeaderLease.objects.update(holder="leader-2", term=2)
    process.clock[0] += settings.SCHEDULER_LEASE / 3
    worker.run_once()
    assert process.sent == ["job_stage"]
    assert (_lease().holder, _lease().term) == ("leader-2", 2)
    assert scheduler.leadership.due(process.clock[0])
    scheduler.run_once()
    assert process.sent == ["job_stage", "leader_acquire"]
    assert not scheduler.leading


def _wait_for(condition: Any, seconds: float, step: Any = None) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if step is not None:
            step()
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_row_whose_notify_was_lost_is_published_within_the_poll_bound():
    """The relay waits idle for far longer than the test (RELAY_INTERVAL 60 s, no
    wake); the worker's poll of the same alias finds the staged row and wakes it
    (O2, N2). Before issue 26 the row waited for the relay's own timed pass."""
    settings = load_settings(
        {"RELAY_INTERVAL": 60, "IDLE_POLL_MAX": 60, "POLL_INTERVAL": 0.1}
    )
    rides = Rides()
    lifecycle = Lifecycle()
    # The worker serves a queue of its own: the published job is not claimed here.
    worker = Worker(settings=settings, queues=["elsewhere"], concurrency=1, rides=rides)
    relay = Relay(settings=settings, lifecycle=lifecycle, rides=rides)
    passes = [0]
    run_once = relay.run_once

    def counted(db: Any = None) -> Any:
        passes[0] += 1
        return run_once(db)

    relay.run_once = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        assert _wait_for(lambda: passes[0] >= 1, 10)  # its first, empty, pass
        with transaction.atomic():
            noop.enqueue(key="lost-notify")  # staged; the relay hears no NOTIFY
        staged = OutboxMessage.objects.get()
        assert staged.published_at is None
        # Polls every POLL_INTERVAL (the bound), each one statement.
        published = _wait_for(
            lambda: OutboxMessage.objects.get().published_at is not None,
            5,
            step=worker.run_once,
        )
        assert published  # woken by the poll, 60 s before its own pass
    finally:
        lifecycle.stop()
        thread.join(10)
        worker.db.close()


def test_polls_that_found_nothing_stand_in_for_the_relays_pass_until_they_stop():
    """While a worker's polls look at the outbox and find nothing, the idle relay
    sends no claim of its own; once they stop (every slot busy) its own timed pass
    comes back within its ceiling (O2, N2)."""
    ceiling = 3.0
    settings = load_settings({"RELAY_INTERVAL": ceiling, "IDLE_POLL_MAX": ceiling})
    lifecycle = Lifecycle()
    relay = Relay(settings=settings, lifecycle=lifecycle, rides=Rides())
    passes: list[float] = []
    run_once = relay.run_once

    def counted(db: Any = None) -> Any:
        passes.append(time.monotonic())
        return run_once(db)

    relay.run_once = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        assert _wait_for(lambda: relay.idle, 10)  # its first pass found nothing
        polling_until = time.monotonic() + 2 * ceiling
        while time.monotonic() < polling_until:  # a poll every 0.2 s finds nothing
            relay.polled(time.monotonic())
            time.sleep(0.2)
        assert len(passes) == 1
        stopped = time.monotonic()
        assert _wait_for(lambda: len(passes) == 2, ceiling + 5)
        assert passes[1] - stopped <= ceiling + 1
    finally:
        lifecycle.stop()
        thread.join(10)
