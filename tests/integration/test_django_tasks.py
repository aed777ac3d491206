"""django.tasks on this queue (X2): Django's @task functions enqueue jobs, a worker runs
them, get_result answers their status and return value, the task signals fire."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.testapp.models import Record
from tests.testapp.tasks import add, attempt_of, boom, double
from ultimate_jobs.backend import JobsBackend, TaskResultStatus, from_signals
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def test_the_backend_supports_every_feature():
    backend = add.get_backend()
    assert isinstance(backend, JobsBackend)
    assert (backend.supports_defer, backend.supports_priority) == (True, True)
    assert (backend.supports_get_result, backend.supports_async_task) == (True, True)


def test_a_task_runs_on_the_queue_and_answers_its_return_value(jobs):
    result = add.enqueue(2, 3)
    assert str(result.status) == "READY"
    job = Job.objects.get(pk=result.id)
    assert (job.name, job.queue, job.input["args"]) == (
        "ultimate_jobs.django_task",
        "default",
        [2, 3],
    )
    assert Record.objects.count() == 0  # nothing ran inline
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.attempts == 1
    assert add.get_result(result.id).return_value == 5


def test_a_failing_task_is_failed_with_its_error(jobs):
    result = boom.enqueue()
    assert Job.objects.get(pk=result.id).priority == 10
    jobs.run()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "builtins.ValueError"
    assert "the task failed" in result.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value


def test_async_tasks_context_and_run_after(jobs):
    doubled = double.enqueue(21)
    with_context = attempt_of.enqueue(label="x")
    later = add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    jobs.run()
    assert double.get_result(doubled.id).return_value == 42  # type: ignore[comparison-overlap]
    value = attempt_of.get_result(with_context.id).return_value
    assert value == {"label": "x", "attempt": 1, "id": with_context.id}
    assert add.get_result(later.id).status == TaskResultStatus.READY
    jobs.travel(hours=1, seconds=1)
    jobs.run()
    assert add.get_result(later.id).return_value == 2


def test_the_task_signals_fire(jobs):
    signals = from_signals()
    seen = []

    def listener(signal_name):
        def receive(sender, task_result, **kwargs):
            seen.append((signal_name, str(task_result.status)))

        return receive

    receivers = {
        name: listener(name)
        for name in ("task_enqueued", "task_started", "task_finished")
    }
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    try:
        add.enqueue(1, 2)
        jobs.run()
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    assert seen == [
        ("task_enqueued", "READY"),
        ("task_started", "RUNNING"),
        ("task_finished", "SUCCESSFUL"),
    ]


def test_an_unknown_result_id_does_not_exist():
    from ultimate_jobs.backend import TaskResultDoesNotExist

    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("not-an-id")
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("01a22ad4-aa7f-73a5-9990-a089d631972f")


@pytest.fixture
def jobs_on_their_alias(settings):
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs"}


@pytest.mark.django_db(transaction=True, databases=["default", "jobs"])
def test_the_bridge_reads_and_writes_the_jobs_alias_only(jobs_on_their_alias, jobs):
    """X2 with the jobs tables on another alias (DATABASE="jobs"): the bridge's reads
    and its stored result go to that alias, never to "default"."""
    result = add.enqueue(2, 3)
    with CaptureQueriesContext(connections["default"]) as default:
        [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert [q["sql"] for q in default if "ultimate_jobs_" in q["sql"]] == []
    assert Job.objects.using("jobs").get(pk=result.id).result == 5
    assert add.get_result(result.id).return_value == 5
