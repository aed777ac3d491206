"""Prefetch across real worker processes (issue 26, W2, W4, W5, W6): a busy worker
holds up to PREFETCH rows beyond its free slots; SIGTERM hands the ones no handler
started back at once, attempt uncounted, for another worker to run once; kill -9
leaves them to their lease like any held row (that claim counted the attempt); two
prefetching workers racing over a backlog run every job exactly once."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import deadline, wait_for, wait_for_progress
from tests.testapp.jobs import hold, touch
from tests.testapp.models import Record
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def started_keys() -> set[str]:
    return set(
        Record.objects.filter(event="started").values_list("key", flat=True).distinct()
    )


def enqueue_holds(prefix: str, count: int, **input_: object) -> dict[str, uuid.UUID]:
    """``count`` bodies that block until released, queued in one statement (so an
    idle worker's first claim sees them all)."""
    answers = hold.enqueue_many(
        [{"key": f"{prefix}{i}", "seconds": 120, **input_} for i in range(count)]
    )
    return {f"{prefix}{i}": answer.id for i, answer in enumerate(answers)}


def held_by_one_worker(ids: list[uuid.UUID]) -> bool:
    rows = Job.objects.filter(id__in=ids, state="running")
    return rows.count() == len(ids) and rows.values("worker_id").distinct().count() == 1


def test_sigterm_hands_back_the_prefetched_rows_at_once_uncounted(start_worker):
    """W6: one body runs (ignoring its token), two rows wait prefetched. The drain
    hands the two back at once, attempt NOT counted, while it still waits for the
    running body; they never start in the draining worker, and another worker runs
    each once."""
    jobs = enqueue_holds("t", 3, honour_cancel=False)
    first = start_worker(
        "--roles", "worker", "--concurrency", "1", "--prefetch", "2",
        DRAIN_TIMEOUT="10m",
    )  # fmt: skip
    wait_for(lambda: len(started_keys()) == 1 and held_by_one_worker([*jobs.values()]))
    [running] = started_keys()
    waiting = sorted(set(jobs) - {running})
    first.terminate()
    first.wait_log("jobs.worker.prefetch-returned")
    # Handed back while the drain still waits for the running body (10 minutes).
    assert first.proc.poll() is None
    rows = {
        key: Job.objects.values_list("state", "attempt", "lease_owner").get(
            pk=jobs[key]
        )
        for key in waiting
    }
    assert set(rows.values()) == {("ready", 0, None)}
    assert Job.objects.values_list("state", "attempt").get(pk=jobs[running]) == (
        "running",
        1,
    )
    for key in waiting:
        Record.objects.create(key=key, event="release")
    second = start_worker("--roles", "worker", "--concurrency", "2")
    wait_for(
        lambda: Job.objects.filter(id__in=[jobs[k] for k in waiting], state="done")
        .count() == 2
    )  # fmt: skip
    for key in waiting:
        assert list(
            Record.objects.filter(key=key)
            .exclude(event="release")
            .values_list("event", "attempt", "pid")
        ) == [("started", 1, second.pid), ("finished", 1, second.pid)]
        assert Job.objects.get(pk=jobs[key]).attempt == 1
    # The running body was never disturbed: released, it finishes in the first worker.
    Record.objects.create(key=running, event="release")
    assert first.wait() == 0
    assert Job.objects.values_list("state", "attempt").get(pk=jobs[running]) == (
        "done",
        1,
    )
    assert first.pid not in set(
        Record.objects.filter(key__in=waiting).values_list("pid", flat=True)
    )


def test_kill_9_leaves_the_prefetched_rows_to_their_lease(start_worker):
    """W5: a killed worker's prefetched rows come back when their lease lapses, like
    any held row; the claim counted their attempt, so each runs once more at attempt
    2 (documented in docs/worker.md)."""
    jobs = enqueue_holds("k", 3)
    first = start_worker(
        "--roles", "worker", "--concurrency", "1", "--prefetch", "2", LEASE="2s"
    )  # fmt: skip
    wait_for(lambda: len(started_keys()) == 1 and held_by_one_worker([*jobs.values()]))
    first.kill()
    for key in jobs:
        Record.objects.create(key=key, event="release")
    second = start_worker("--roles", "worker", "--concurrency", "3", LEASE="2s")
    wait_for(
        lambda: Job.objects.filter(id__in=jobs.values(), state="done").count() == 3,
        timeout=deadline(lease=2),
    )
    assert sorted(
        Job.objects.filter(id__in=jobs.values()).values_list("attempt", flat=True)
    ) == [2, 2, 2]
    finished = Record.objects.filter(event="finished")
    assert sorted(finished.values_list("key", flat=True)) == sorted(jobs)
    assert set(finished.values_list("pid", flat=True)) == {second.pid}


def test_two_prefetching_workers_race_over_a_backlog_each_job_once(start_worker):
    """W2, W3: prefetched rows are claimed rows: with no crash, no job runs twice."""
    count = 600
    touch.enqueue_many([{"key": f"r{i}", "tenant": "t"} for i in range(count)])
    workers = [
        start_worker("--roles", "worker", "--concurrency", "4", "--prefetch", "4")
        for _ in range(2)
    ]
    wait_for_progress(
        lambda: Job.objects.filter(state="done").count(), count, message="all done"
    )
    assert Record.objects.count() == count
    assert Record.objects.values("key").distinct().count() == count
    assert set(Record.objects.values_list("attempt", flat=True)) == {1}
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}
    assert set(Record.objects.values_list("pid", flat=True)) <= {w.pid for w in workers}
