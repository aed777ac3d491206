"""Prefetch and the batched hand-off (issue 26, W2, W4, W6, L1-L3): a busy worker's
plain claim takes up to PREFETCH rows beyond its free slots; they wait in the ledger,
their leases renewed, until a handler takes one; a capped name and a budget get
exactly the free slots; a drain hands the waiting rows back uncounted, never run."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.testapp.jobs import capped, noop
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.ground.cancel import LEASE_LOST
from ultimate_jobs.limits.budgets import Limits
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.lifecycle import DRAIN, FINISH
from ultimate_jobs.runtime.worker import Worker, default_prefetch

pytestmark = pytest.mark.django_db(transaction=True)


def worker(concurrency: int = 4, prefetch: int | None = 2, **options) -> Worker:
    settings = load_settings({"PREFETCH": prefetch} if prefetch is not None else {})
    return Worker(
        settings=settings, queues=["default"], concurrency=concurrency, **options
    )


def enqueue_noops(count: int) -> list[uuid.UUID]:
    return [noop.enqueue(key=f"n{i}").id for i in range(count)]


def test_the_default_is_the_concurrency_at_most_sixteen():
    assert [default_prefetch(c) for c in (1, 2, 4, 8, 16, 64)] == [0, 2, 4, 8, 16, 16]
    assert worker(concurrency=16, prefetch=None).prefetch == 16
    assert worker(concurrency=16, prefetch=0).prefetch == 0


def test_a_plain_claim_takes_the_free_slots_plus_prefetch():
    """No handler runs here: every claimed row stays held and waiting."""
    ids = enqueue_noops(10)
    w = worker(concurrency=4, prefetch=2)
    try:
        assert w.run_once() == 6  # 4 free slots + 2 prefetched
        assert w.ledger.held_count == 6 and w.ledger.waiting_count == 6
        assert sorted(w.ledger.ids()) == sorted(ids[:6])
        assert not any(entry.started for entry in w.ledger.entries())
        # Every slot is taken and PREFETCH rows wait: a busy worker claims nothing
        # more (no statement) until a batch is worth it.
        w._saturated = True
        assert w.run_once() is None
        assert Job.objects.filter(state="running").count() == 6
    finally:
        w.db.close()


def test_prefetch_zero_claims_exactly_the_free_slots():
    enqueue_noops(10)
    w = worker(concurrency=4, prefetch=0)
    try:
        assert w.run_once() == 4
        assert w.run_once() is None
    finally:
        w.db.close()


def test_a_capped_name_is_claimed_for_exactly_the_free_slots():
    """L1: a capped row never waits prefetched (it would hold a fleet slot idle)."""
    for i in range(6):
        capped.enqueue(key=f"c{i}", seconds=0)
    w = worker(concurrency=1, prefetch=4)
    try:
        assert w.prefetch == 4
        assert w.run_once() == 1  # the limited claim: one free slot, no prefetch
        assert [row["name"] for row in w.ledger.rows()] == [capped.name]
    finally:
        w.db.close()


def test_a_budget_claims_exactly_the_free_slots():
    """L3: under a per-process budget every name takes the limited claim, and no
    prefetch: the budget counts what is held."""
    enqueue_noops(10)
    w = worker(concurrency=4, prefetch=4, limits=Limits(total=3))
    try:
        assert w.prefetch == 0
        assert w.run_once() == 3
    finally:
        w.db.close()


def test_max_jobs_bounds_the_prefetching_claim():
    """--max-jobs stays exact: the claim never takes more than the remaining count."""
    enqueue_noops(10)
    w = worker(concurrency=4, prefetch=4, max_jobs=5)
    try:
        assert w.run_once() == 5
        assert w.run_once() is None
        assert w.lifecycle.reason == FINISH
    finally:
        w.db.close()


def test_the_heartbeat_renews_the_prefetched_rows():
    """W4: a row that waits for a handler keeps its lease."""
    enqueue_noops(6)
    w = worker(concurrency=4, prefetch=2)
    beat_db = DirectDatabase("default")
    try:
        assert w.run_once() == 6
        soon = timezone.now() + timedelta(seconds=1)
        Job.objects.filter(state="running").update(lease_expires_at=soon)
        w.heartbeat.run_once(beat_db)
        renewed = Job.objects.filter(state="running").values_list(
            "lease_expires_at", flat=True
        )
        assert len(renewed) == 6
        assert all(
            at is not None and at > soon + timedelta(seconds=10) for at in renewed
        )
        assert not any(entry.token.is_set() for entry in w.ledger.entries())
    finally:
        beat_db.close()
        w.db.close()


def test_a_drain_hands_back_the_unstarted_rows_uncounted_at_once():
    """W6: prefetched rows whose bodies never started go back to 'ready' with their
    attempt not counted, before the drain waits for anything; none of them starts."""
    ids = enqueue_noops(6)
    w = worker(concurrency=4, prefetch=2)
    try:
        assert w.run_once() == 6
        entries = w.ledger.entries()
        started, prefetched = entries[0], entries[-1]
        assert [e.extra for e in entries] == [False] * 4 + [True] * 2  # 4 free slots
        assert w.ledger.start(started)  # one handler took one row: its body runs
        w.lifecycle.stop(DRAIN)
        assert w.ledger.withholding
        assert not w.ledger.start(prefetched)  # from now on no prefetched row starts
        returned = w.pool.drain(w.db, 0.05, w.worker_id, withhold=True)
        assert returned == 1  # the started one, at the deadline, counted
        rows = {job.id: job for job in Job.objects.filter(id__in=ids)}
        assert rows[started.row["id"]].attempt == 1  # counted (W6, abandoned)
        waiting = [i for i in ids if i != started.row["id"]]
        assert {(rows[i].state, rows[i].attempt) for i in waiting} == {("ready", 0)}
        assert w.ledger.ids() == [started.row["id"]]  # its handler lets it go
    finally:
        w.db.close()


def test_a_row_claimed_for_a_free_slot_still_starts_after_the_drain_began():
    """W6 (and Django's test_interrupt_signals): a row claimed for a free slot that no
    handler had taken yet when the signal came runs as it always did; only the rows
    claimed beyond the free slots are withheld and handed back."""
    ids = enqueue_noops(3)
    w = worker(concurrency=2, prefetch=1)
    try:
        assert w.run_once() == 3
        slotted, _, prefetched = w.ledger.entries()
        w.lifecycle.stop(DRAIN)
        assert w.ledger.start(slotted)  # its body runs and gets DRAIN_TIMEOUT
        assert not w.ledger.start(prefetched)
        assert w.pool.drain(w.db, 0.05, w.worker_id, withhold=True) == 1
        rows = dict(Job.objects.filter(id__in=ids).values_list("id", "attempt"))
        assert rows[slotted.row["id"]] == 1  # abandoned at the deadline: counted
        assert rows[prefetched.row["id"]] == 0
    finally:
        w.db.close()


def test_max_jobs_runs_its_prefetched_rows_and_hands_back_only_at_the_deadline():
    """--max-jobs (FINISH) withholds nothing: its claimed rows are all run; a row no
    handler started by the drain deadline goes back uncounted."""
    ids = enqueue_noops(3)
    w = worker(concurrency=1, prefetch=2, max_jobs=3)
    try:
        assert w.run_once() == 3
        w.lifecycle.stop(FINISH)
        assert not w.ledger.withholding
        first = w.ledger.entries()[0]
        assert w.ledger.start(first)  # FINISH: a handler still starts a waiting row
        assert w.pool.drain(w.db, 0.05, w.worker_id, withhold=False) == 1
        states = dict(Job.objects.filter(id__in=ids).values_list("id", "attempt"))
        assert states[first.row["id"]] == 1
        assert sorted(v for k, v in states.items() if k != first.row["id"]) == [0, 0]
    finally:
        w.db.close()


def test_a_prefetched_row_whose_lease_was_lost_while_waiting_never_starts():
    """W3, W4: the heartbeat cancelled its token (LEASE_LOST): the row may be another
    worker's now, so the handler that takes it drops it without running the body."""
    [job_id] = enqueue_noops(1)
    w = worker(concurrency=1, prefetch=0)
    try:
        assert w.run_once() == 1
        [entry] = w.ledger.entries()
        entry.token.cancel(LEASE_LOST)
        assert w.ledger.start(entry)
        w.pool._run_one(None, entry)  # type: ignore[arg-type]  # no executor is used
        assert w.ledger.held_count == 0
        row = Job.objects.get(pk=job_id)
        assert (row.state, row.attempt, row.lease_owner) == (
            "running",
            1,
            entry.row["lease_owner"],
        )  # untouched: its lease lapses to whoever holds it (W5)
    finally:
        w.db.close()
