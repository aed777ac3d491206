"""django.tasks on this queue (X2): Django's @task functions enqueue jobs, a worker runs
them, get_result answers their status and return value, the task signals fire."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import SuspiciousOperation
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.taskapi import (
    IMMEDIATE,
    JOBS_BACKEND,
    LOGGER,
    TaskResultDoesNotExist,
    default_task_backend,
    task_backends,
)
from tests.testapp.models import Record
from tests.testapp.tasks import add, attempt_of, boom, double
from tests.testapp.upstream_tasks import (
    calculate_meaning_of_life,
    echo,
    failing_task_system_exit,
    failing_task_value_error,
    noop_task,
)
from ultimate_jobs.backend import (
    JobsBackend,
    TaskResultStatus,
    django_task,
    from_signals,
)
from ultimate_jobs.ground.exceptions import InvalidJobPayload
from ultimate_jobs.models import Job, OutboxMessage

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


# -- regressions (issue 19): each failed before its fix -----------------------------


class Rollback(Exception):
    pass


def visible_elsewhere(connection, result_id):
    """Whether another session sees the task's row yet (job or staged outbox row)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ultimate_jobs_job WHERE id = %(id)s)"
            " + (SELECT count(*) FROM ultimate_jobs_outbox WHERE id = %(id)s)",
            {"id": result_id},
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_transaction_answers_a_ready_result_at_once(
    jobs, second_connection
):
    """Defect 1 (X2, O1): with OUTBOX="auto" an enqueue inside atomic() is staged in the
    outbox; it answers a READY result with its id at once, get_result() answers it
    inside the transaction and after the commit, and the job runs once relayed. Also
    the backport's DatabaseBackendTestCase.test_doesnt_wait_until_transaction_commit:
    another session sees nothing before the COMMIT and the row after it."""
    with transaction.atomic():
        result = add.enqueue(2, 3)
        assert result.status == TaskResultStatus.READY
        assert uuid.UUID(result.id).version == 7
        assert result.enqueued_at is not None
        assert (result.args, result.kwargs, result.task) == ([2, 3], {}, add)
        assert add.get_result(result.id) == result
        assert OutboxMessage.objects.filter(pk=result.id).count() == 1
        assert visible_elsewhere(second_connection, result.id) == 0
    assert visible_elsewhere(second_connection, result.id) == 1
    staged = add.get_result(result.id)  # committed, not yet relayed
    assert (staged.status, staged.enqueued_at) == (
        TaskResultStatus.READY,
        result.enqueued_at,
    )
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)


def test_a_rolled_back_enqueue_leaves_no_result():
    """Defect 1: after a rollback the staged row is gone, and so is the result."""
    with pytest.raises(Rollback), transaction.atomic():
        result = add.enqueue(1, 1)
        assert add.get_result(result.id).status == TaskResultStatus.READY
        raise Rollback
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(result.id)


@pytest.mark.urls("tests.testapp.urls")
def test_a_view_under_atomic_requests_enqueues(client, jobs, monkeypatch):
    """Defect 1 in a request: a view under ATOMIC_REQUESTS answers the result (the
    backport's test_meaning_of_life_view, with every request in a transaction)."""
    monkeypatch.setitem(connections["default"].settings_dict, "ATOMIC_REQUESTS", True)
    response = client.get("/meaning-of-life")
    assert response.status_code == 200
    data = response.json()
    assert (data["result"], data["status"]) == (None, "READY")
    jobs.run()
    result = default_task_backend.get_result(data["result_id"])
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


@pytest.fixture
def two_aliases(settings):
    """An Immediate default (which cannot answer results) and JobsBackend on "jobs"."""
    settings.TASKS = {
        "default": {"BACKEND": IMMEDIATE},
        "jobs": {"BACKEND": JOBS_BACKEND, "QUEUES": ["default", "queue_1"]},
    }


def test_using_settings_are_kept_on_the_result_and_the_job(two_aliases, jobs):
    """Defect 2 (X2): priority, queue_name, run_after and backend given to .using() are
    what the job carries and what every answer for the result carries."""
    when = timezone.now() + timedelta(hours=1)
    enqueued_task = calculate_meaning_of_life.using(
        priority=7, queue_name="queue_1", run_after=when, backend="jobs"
    )
    result = enqueued_task.enqueue()
    assert (result.task, result.backend) == (enqueued_task, "jobs")
    job = Job.objects.get(pk=result.id)
    assert (job.queue, job.priority, job.run_at, job.state) == (
        "queue_1",
        7,
        when,
        "delayed",
    )
    assert task_backends["jobs"].get_result(result.id) == result
    assert enqueued_task.get_result(result.id).task == enqueued_task
    result.refresh()  # the "jobs" alias answers, not the Immediate default
    assert jobs.run(queues=["default"]) == []
    jobs.travel(hours=1, seconds=1)
    [attempt] = jobs.run(queues=["queue_1"])
    assert attempt.outcome == "completed"
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert result.task == enqueued_task


def test_a_task_raising_system_exit_fails_in_the_testing_runner(jobs):
    """Defect 3 (X2, W9): SystemExit from a task ends the attempt FAILED with it."""
    result = failing_task_system_exit.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is SystemExit
    assert result.errors[0].traceback.endswith(
        "SystemExit: This Task failed due to SystemExit\n"
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests.testapp.gone.task", "ModuleNotFoundError"),  # the module was removed
        ("tests.testapp.upstream_tasks.renamed", "ImportError"),  # the function was
        ("subprocess.check_output", "SuspiciousOperation"),  # not a Task: never called
    ],
)
def test_a_stored_task_path_that_no_longer_imports_fails_the_job(
    jobs, caplog, path, expected
):
    """Defect 4 (X2): the job ends FAILED, the runner carries on, and the failure is
    logged instead of escaping from the task_finished receiver."""
    answer = django_task.enqueue(
        task=path, args=[["exit", "1"]], kwargs={}, backend="default", call_id=path
    )
    following = add.enqueue(1, 2)
    attempts = jobs.run()
    assert [a.outcome for a in attempts] == ["dead-lettered", "completed"]
    job = Job.objects.get(pk=answer.id)
    assert job.state == "dead"
    assert job.last_error.split(":")[0].rsplit(".", 1)[1] == expected
    [line] = [r for r in caplog.records if r.getMessage() == "jobs.task.unloadable"]
    assert (line.job_id, line.task) == (str(answer.id), path)
    assert line.exc_info is not None
    assert line.exc_info[0].__name__ == expected
    assert add.get_result(following.id).return_value == 3
    with pytest.raises((ImportError, SuspiciousOperation)):
        default_task_backend.get_result(str(answer.id))


def test_the_error_log_line_of_a_failed_task_carries_the_exception(jobs, caplog):
    """Defect 5 (X2): django.tasks logs a FAILED task at ERROR with the exception."""
    result = failing_task_value_error.enqueue()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        jobs.run()
    [line] = [r for r in caplog.records if r.name == LOGGER and r.levelname == "ERROR"]
    assert line.getMessage().startswith(f"Task id={result.id} ")
    assert line.exc_info is not None
    assert line.exc_info[0] is ValueError
    assert "ValueError: This Task failed due to ValueError" in caplog.text


def test_arguments_are_checked_with_djangos_own_normalize_json(jobs):
    """Defect 5 (X2): the same check, wording and conversions as every other backend:
    bytes are text, int keys are accepted, other types are refused before a write."""
    before = Job.objects.count()
    with pytest.raises(TypeError, match="Unsupported type"):
        noop_task.enqueue(timezone.now())
    with pytest.raises(ValueError, match="Unsupported value"):
        noop_task.enqueue(b"\xff")
    with pytest.raises(InvalidJobPayload, match=r"args\[0\]=nan"):  # jsonb has no NaN
        noop_task.enqueue(float("nan"))
    assert Job.objects.count() == before
    result = echo.enqueue(b"hello", {1: "a"}, key=(1, 2))
    assert (result.args, result.kwargs) == (["hello", {"1": "a"}], {"key": [1, 2]})
    assert echo.get_result(result.id) == result
    jobs.run()
    assert echo.get_result(result.id).return_value == {
        "args": ["hello", {"1": "a"}],
        "kwargs": {"key": [1, 2]},
    }
