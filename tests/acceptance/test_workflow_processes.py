"""Fan-out and fan-in across real worker processes (S10, S11): 1,000 children over
three workers, one SIGKILLed twice; a concurrency-1 worker alone runs a parent with ten
children (the waiting parent holds no slot); a worker killed between the spawns and the
wait; children on another database alias."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import deadline, wait_for
from tests.testapp.models import Record
from tests.testapp.workflow_jobs import fan_in, fan_in_far, square
from ultimate_jobs.models import Job, JobStep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

# fan_in re-checks its wait every 60 s (event_poll): what must come from the wake of
# the last child's settle comes sooner than that.
BEFORE_THE_POLL = 50.0


def state_of(job_id, using="default"):
    return Job.objects.using(using).values_list("state", flat=True).get(pk=job_id)


def children_of(parent_id):
    return Job.objects.filter(parent_id=parent_id)


def assert_fanned_in_once(parent_id, count):
    """The parent completed once, with every child's result, each child once."""
    parent = Job.objects.get(pk=parent_id)
    children = list(children_of(parent_id).order_by("id"))
    assert len(children) == count
    assert len({c.idempotency_key for c in children}) == count
    assert Job.objects.filter(name=square.name).count() == count
    assert sorted(c.input["n"] for c in children) == list(range(count))
    assert parent.state == "done"
    assert parent.result is not None
    assert parent.result["states"] == ["done"] * count
    assert parent.result["sum"] == sum(n * n for n in range(count))
    assert parent.result["ids"] == [str(c.id) for c in children]
    assert Record.objects.filter(job_id=parent_id, event="fanned-in").count() == 1
    # woken by the last settle, not found at the parent's 60 s poll
    [wait] = JobStep.objects.filter(job_id=parent_id, kind="jobs")
    last_child = max(c.finished_at for c in children if c.finished_at)
    assert (wait.finished_at - last_child).total_seconds() < BEFORE_THE_POLL


def test_a_thousand_children_over_three_workers_one_killed_twice(start_worker):
    """The first kill lands while the parent is spawning (the doomed worker is alone
    until then, so the parent is its); the second while the children run."""
    count = 1000
    parent = fan_in.enqueue(key="big", count=count)
    doomed = start_worker("--concurrency", "2", LEASE="2s")
    wait_for(lambda: children_of(parent.id).count() >= 100, timeout=deadline(work=60))
    doomed.kill()
    spawned_before = children_of(parent.id).count()
    assert spawned_before < count, "the spawns were over before the kill"
    doomed = start_worker("--concurrency", "2", LEASE="2s")
    start_worker("--concurrency", "2", LEASE="2s")
    start_worker("--concurrency", "2", LEASE="2s")
    wait_for(
        lambda: children_of(parent.id).filter(state="done").count() >= 400,
        timeout=deadline(lease=2, work=count * 0.2),
    )
    doomed.kill()
    start_worker("--concurrency", "2", LEASE="2s")
    wait_for(
        lambda: state_of(parent.id) == "done",
        timeout=deadline(lease=2, work=count * 0.3),
    )
    assert_fanned_in_once(parent.id, count)
    # the spawns the first kill interrupted were recorded once and answered on replay
    assert Job.objects.get(pk=parent.id).attempt >= 2


def test_a_concurrency_one_worker_runs_a_parent_with_ten_children(start_worker):
    """The waiting parent holds no slot: the one slot runs the ten children, and the
    last one's settle wakes the parent before its poll."""
    parent = fan_in.enqueue(key="one", count=10)
    start_worker("--concurrency", "1", LEASE="5s")
    wait_for(lambda: state_of(parent.id) == "done", timeout=BEFORE_THE_POLL)
    assert_fanned_in_once(parent.id, 10)


def test_a_worker_killed_between_the_spawns_and_the_wait(start_worker, tmp_path):
    """The replay answers every spawn from storage: no child is enqueued twice."""
    gate = str(tmp_path / "spawned")
    parent = fan_in.enqueue(key="crash", count=5, gate=gate)
    first = start_worker("--concurrency", "2", LEASE="2s")
    wait_for(lambda: Path(gate + ".reached").exists())
    assert children_of(parent.id).count() == 5
    first.kill()
    Path(gate + ".release").touch()
    start_worker("--concurrency", "2", LEASE="2s")
    wait_for(lambda: state_of(parent.id) == "done", timeout=deadline(lease=2))
    assert_fanned_in_once(parent.id, 5)
    assert Job.objects.get(pk=parent.id).attempt == 2  # the kill cost one attempt


ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}


@pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])
def test_children_on_another_alias(start_worker, settings):
    """Q1: the children are staged in the parent's outbox and published on jobs_b by
    the relay with their parent_id; the worker that settles the last of them wakes the
    parent on default, whose event_poll is 10 minutes: done within a lease and a few
    round trips means woken."""
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    parent = fan_in_far.enqueue(key="routed", count=3, queue="routed")
    start_worker("--concurrency", "2", LEASE="5s", QUEUES=json.dumps(ROUTED))
    wait_for(lambda: state_of(parent.id) == "done", timeout=deadline(lease=5, work=10))
    children = Job.objects.using("jobs_b").filter(name=square.name)
    assert children.count() == 3
    assert set(children.values_list("parent_id", flat=True)) == {parent.id}
    [wait] = JobStep.objects.filter(job_id=parent.id, kind="jobs")
    last_child = max(c.finished_at for c in children if c.finished_at)
    assert wait.finished_at is not None
    assert (wait.finished_at - last_child).total_seconds() < BEFORE_THE_POLL
    assert Job.objects.filter(name=square.name).count() == 0
    result = Job.objects.get(pk=parent.id).result
    assert result is not None
    assert result["states"] == ["done"] * 3
    assert result["sum"] == 0 + 1 + 4
    assert sorted(result["ids"]) == sorted(str(c.id) for c in children)
