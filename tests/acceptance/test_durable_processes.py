"""Durable steps across real worker processes: a fan-out and an atomic step killed with
SIGKILL (S1, S9), a publication from another process waking a wait (S4), a short sleep
resumed by the worker's local timer (S3), a deadline failing the attempt while the body
runs on (S6)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.conftest import deadline, wait_for
from tests.testapp.durable_jobs import (
    atomic_write,
    await_payment,
    bounded,
    fan_child,
    fan_out,
    nap,
)
from tests.testapp.jobs import touch
from tests.testapp.models import Record
from ultimate_jobs import publish_event
from ultimate_jobs.models import Event, Job, JobStep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

# The wake tests run workers that poll every 60 s: what they wait for must come sooner,
# or the poll, not the wake under test, could be what passed them.
BEFORE_THE_POLL = 50.0


def state_of(job_id):
    return Job.objects.values_list("state", flat=True).get(pk=job_id)


def in_state(job_id, state):
    return lambda: state_of(job_id) == state


def events(key):
    return list(
        Record.objects.filter(key=key).order_by("id").values_list("event", "attempt")
    )


def test_a_fan_out_killed_half_way_enqueues_every_child_exactly_once(
    start_worker, tmp_path
):
    """S1: one step per child enqueue, keyed by the child. The worker is SIGKILLed
    half way, after the first children have run (their keys are free again); the
    replay answers their steps from storage, so no child is enqueued twice."""
    gate = str(tmp_path / "fan")
    children = [f"child-{i}" for i in range(10)]
    answer = fan_out.enqueue(key="fan", children=children, gate=gate)
    first = start_worker("--concurrency", "4", LEASE="2s")
    wait_for(lambda: Path(gate + ".reached").exists())
    half = [e for e, _ in events("fan")]
    assert half == [f"enqueue:child-{i}" for i in range(6)]
    wait_for(lambda: Job.objects.filter(name=fan_child.name, state="done").count() == 6)
    first.kill()

    start_worker("--concurrency", "4", LEASE="2s")
    wait_for(lambda: state_of(answer.id) == "done", timeout=deadline(lease=2))
    wait_for(
        lambda: Job.objects.filter(name=fan_child.name, state="done").count() == 10
    )
    assert [e for e, _ in events("fan")] == [f"enqueue:{c}" for c in children]
    assert [a for _, a in events("fan")] == [1] * 6 + [2] * 4
    child_rows = Job.objects.filter(name=fan_child.name)
    assert child_rows.count() == 10
    assert sorted(child_rows.values_list("idempotency_key", flat=True)) == sorted(
        f"child:{c}" for c in children
    )
    stored = [str(s.output) for s in JobStep.objects.filter(job_id=answer.id)]
    assert sorted(stored) == sorted(
        str(pk) for pk in child_rows.values_list("id", flat=True)
    )


def test_an_atomic_step_killed_before_its_commit_leaves_no_row(start_worker, tmp_path):
    """S9: fn wrote its row, the worker died before the commit: neither the row nor
    the checkpoint exists; the next worker runs the step once, for good."""
    gate = str(tmp_path / "atomic")
    answer = atomic_write.enqueue(key="atom", gate=gate)
    first = start_worker("--concurrency", "1", LEASE="2s")
    wait_for(lambda: Path(gate + ".reached").exists())
    assert events("atom") == []  # written inside the uncommitted transaction
    first.kill()
    assert events("atom") == []
    assert JobStep.objects.filter(job_id=answer.id).count() == 0

    start_worker("--concurrency", "1", LEASE="2s")
    wait_for(lambda: state_of(answer.id) == "done", timeout=deadline(lease=2))
    assert events("atom") == [("written", 2), ("after", 2)]
    [step] = JobStep.objects.filter(job_id=answer.id)
    assert (step.kind, step.output) == ("atomic", {"written": "atom"})


@pytest.mark.needs_wake
def test_wait_for_event_resumes_promptly_after_a_publication_from_another_process(
    start_worker, capsys
):
    """S4: the publication (this test process) wakes the suspended run in the worker
    process at once: not at its event_poll (1 hour here), nor at the worker's next poll
    (a minute apart here), so only the publication's own wake can make it. The delay
    from publication to the wait's answer is measured on the database's clock
    (event.published_at to the step's finished_at) and printed; the assertion is a
    generous bound. One queue per run, so no enqueue announcement is throttled."""
    queues = [f"lat{i}" for i in range(20)]
    # The worker role alone: its queue channel is then the only one the wake session
    # subscribes, so "jobs.wake.live" below means that channel is heard (with the
    # scheduler role too, the scheduler's channel may be proven first, alone).
    worker = start_worker(
        "--roles",
        "worker",
        "--concurrency",
        "4",
        "--queues",
        ",".join(queues),
        "--allow-unknown-queues",  # queues of the test's own, declared by no job
        POLL_INTERVAL="60s",
        IDLE_POLL_MAX="60s",
        WOKEN_IDLE_POLL_MAX="60s",
    )
    worker.wait_log("jobs.wake.live")
    delays = []
    for index, queue in enumerate(queues):
        answer = await_payment.using(queue=queue).enqueue(
            key=f"lat-{index}", order=f"L{index}"
        )
        wait_for(in_state(answer.id, "suspended"), interval=0.005)
        published = publish_event("order.paid", {"order": f"L{index}", "amount": index})
        assert published.woken == 1
        wait_for(
            in_state(answer.id, "done"),
            timeout=BEFORE_THE_POLL,
            interval=0.005,
            message="the publication to wake the run (not the 60 s poll)",
        )
        step = JobStep.objects.get(job_id=answer.id)
        event = Event.objects.get(pk=published.id)
        assert step.finished_at is not None
        delays.append((step.finished_at - event.published_at).total_seconds() * 1000)
        assert events(f"lat-{index}")[-1] == (f"paid:{index}", 1)
    with capsys.disabled():
        print(
            f"\nS4 publication-to-answer across processes, ms (n={len(delays)}): "
            f"median {statistics.median(delays):.1f}, max {max(delays):.1f}, "
            f"all {[round(d, 1) for d in delays]}"
        )
    # Generous, for a loaded CI machine: well under the 60 s poll and the 1 h event_poll,
    # which are the only other ways the run could come back.
    assert max(delays) < 30000


@pytest.mark.needs_wake
def test_a_short_sleep_frees_the_worker_and_resumes_on_its_local_timer(start_worker):
    """S3: the sleeping run holds no slot (another job runs meanwhile on the one
    handler), and wakes on time with every poll a minute apart: only the worker's
    local timer can claim it within the deadline of this test."""
    worker = start_worker(
        "--roles",
        "worker",  # one channel: "jobs.wake.live" is the queue channel's
        "--concurrency",
        "1",
        "--queues",
        "default,other",
        "--allow-unknown-queues",
        POLL_INTERVAL="60s",
        IDLE_POLL_MAX="60s",
        WOKEN_IDLE_POLL_MAX="60s",
    )
    worker.wait_log("jobs.wake.live")
    answer = nap.enqueue(key="nap", seconds=4)
    wait_for(lambda: state_of(answer.id) == "suspended")
    # Another queue, so its enqueue announcement is not throttled behind nap's.
    other = touch.using(queue="other").enqueue(key="meanwhile", tenant="t")
    wait_for(lambda: state_of(other.id) == "done")
    assert state_of(answer.id) == "suspended"
    wait_for(
        lambda: state_of(answer.id) == "done",
        timeout=BEFORE_THE_POLL,
        message="the local timer to wake the 4 s nap (not the 60 s poll)",
    )
    # The body replays from the top on wake: "before" twice, one attempt in all.
    assert events("nap") == [("before", 1), ("before", 1), ("after", 1)]
    order = list(
        Record.objects.filter(key__in=["nap", "meanwhile"])
        .order_by("id")
        .values_list("event", flat=True)
    )
    assert order == ["before", "ran", "before", "after"]


def test_a_worker_fails_a_timed_out_attempt_at_its_deadline_while_the_body_runs_on(
    start_worker, tmp_path
):
    """S6: at the deadline the token is cancelled and the attempt failed at once (the
    job is claimable again) though the body ignores its token; when the body goes on,
    its step write is refused and jobs.timeout.abandoned is logged."""
    gate = str(tmp_path / "deadline")
    answer = bounded.enqueue(key="dl", gate=gate)
    worker = start_worker("--concurrency", "1")
    wait_for(lambda: Path(gate + ".reached").exists())
    wait_for(
        lambda: Job.objects.filter(
            pk=answer.id, state="delayed", error_code="X_JOB_TIMEOUT"
        ).exists(),
        message="the deadline to fail the attempt while the body is held",
    )
    assert not Path(gate + ".release").exists()  # the body is still held
    assert events("dl") == [("started", 1)]
    Path(gate + ".release").touch()
    wait_for(lambda: ("late-step-refused", 1) in events("dl"))
    worker.wait_log("jobs.timeout.abandoned")
    assert JobStep.objects.filter(job_id=answer.id).count() == 0
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.attempt, job.lease_owner) == ("delayed", 1, None)
