"""The Tasks contract (X2), checked with Django's own tests against JobsBackend.

Each test re-writes one or more backend-agnostic tests of Django's ``tests/tasks/``
(``test_tasks.py``, ``test_dummy_backend.py``, ``test_immediate_backend.py``) or of the
django-tasks backport's ``tests/tests/`` (its database backend's
``test_database_backend.py``), keeping their assertions; its docstring names them.
Where upstream runs a task at enqueue (ImmediateBackend) or through ``db_worker
--batch``, the test runs it with ``ultimate_jobs.testing`` (the ``jobs`` fixture),
which drains the queue through the worker's own SQL; the real ``jobs_worker`` cases
are in tests/acceptance/test_django_tasks_worker.py. What does not apply, and why, is
listed in docs/django-tasks.md.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import re
import uuid
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string

from tests.taskapi import (
    DEFAULT_TASK_QUEUE_NAME,
    IMMEDIATE,
    JOBS_BACKEND,
    LOGGER,
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    ImmediateBackend,
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    default_task_backend,
    signals,
    task,
    task_backends,
)
from tests.testapp import upstream_tasks as test_tasks
from ultimate_jobs.backend import JobsBackend, django_task
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db

# Pickling Tasks (Task.__reduce__) and the run_after check of @task are Django 6's.
DJANGO_ONLY = pytest.mark.skipif(
    not hasattr(Task, "_reconstruct"), reason="not in the django-tasks backport"
)


@pytest.fixture(autouse=True)
def tasks_settings(settings):
    """Upstream's TASKS, with JobsBackend where upstream has its backend under test."""
    settings.TASKS = {
        "default": {"BACKEND": JOBS_BACKEND, "QUEUES": ["default", "queue_1"]},
        "immediate": {"BACKEND": IMMEDIATE, "QUEUES": []},
        "missing": {"BACKEND": "does.not.exist"},
    }
    settings.USE_TZ = True


@pytest.fixture
def received():
    """What task_enqueued sends (the backport's _capture_task_enqueued_signal)."""
    seen = []

    def capture(sender, task_result, **kwargs):
        seen.append((sender, task_result))

    signals.task_enqueued.connect(capture, dispatch_uid="contract", weak=False)
    yield seen
    signals.task_enqueued.disconnect(capture, dispatch_uid="contract")


def run(coroutine_function, *args, **kwargs):
    """Run an async test body from the test's thread (its database connection)."""
    return async_to_sync(coroutine_function)(*args, **kwargs)


def assert_ready(result, task, args, kwargs):
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert result.started_at is None
    assert result.last_attempted_at is None
    assert result.finished_at is None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value
    assert result.task == task
    assert (result.args, result.kwargs) == (args, kwargs)
    assert result.attempts == 0


def assert_ran(result, status):
    result.refresh()
    assert result.status == status
    assert result.is_finished is True
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result.attempts == 1


# -- the backend and its Tasks ------------------------------------------------------


def test_using_correct_backend():
    """Django test_tasks.py TaskTestCase.test_using_correct_backend,
    test_dummy_backend.py / test_immediate_backend.py test_using_correct_backend,
    backport test_database_backend.py DatabaseBackendTestCase.test_using_correct_backend."""
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], JobsBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == {}


def test_check():
    """Django test_dummy_backend.py test_check, backport test_immediate_backend.py
    test_check, backport DatabaseBackendTestCase.test_check."""
    assert list(default_task_backend.check()) == []


def test_task_decorator():
    """Django TaskTestCase.test_task_decorator."""
    assert isinstance(test_tasks.noop_task, Task)
    assert isinstance(test_tasks.noop_task_async, Task)
    assert isinstance(test_tasks.noop_task_from_bare_decorator, Task)


def test_using_priority():
    """Django TaskTestCase.test_using_priority."""
    assert test_tasks.noop_task.priority == 0
    assert test_tasks.noop_task.using(priority=1).priority == 1
    assert test_tasks.noop_task.priority == 0


def test_using_queue_name():
    """Django TaskTestCase.test_using_queue_name."""
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME
    assert test_tasks.noop_task.using(queue_name="queue_1").queue_name == "queue_1"
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME


def test_using_run_after():
    """Django TaskTestCase.test_using_run_after."""
    now = timezone.now()
    assert test_tasks.noop_task.run_after is None
    assert test_tasks.noop_task.using(run_after=now).run_after == now
    assert test_tasks.noop_task.run_after is None


def test_using_unknown_backend():
    """Django TaskTestCase.test_using_unknown_backend."""
    assert test_tasks.noop_task.backend == "default"
    with pytest.raises(InvalidTaskBackend, match="The connection 'unknown' doesn't"):
        test_tasks.noop_task.using(backend="unknown")


def test_using_missing_backend():
    """Django TaskTestCase.test_using_missing_backend."""
    with pytest.raises(
        InvalidTaskBackend,
        match=re.escape(
            "Could not find backend 'does.not.exist': No module named 'does'"
        ),
    ):
        test_tasks.noop_task.using(backend="missing")


def test_using_creates_new_instance():
    """Django TaskTestCase.test_using_creates_new_instance."""
    new_task = test_tasks.noop_task.using()
    assert new_task == test_tasks.noop_task
    assert new_task is not test_tasks.noop_task


def test_chained_using():
    """Django TaskTestCase.test_chained_using."""
    now = timezone.now()
    run_after_task = test_tasks.noop_task.using(run_after=now)
    assert run_after_task.run_after == now
    priority_task = run_after_task.using(priority=10)
    assert (priority_task.priority, priority_task.run_after) == (10, now)
    assert run_after_task.priority == 0


def test_naive_datetime():
    """Django TaskTestCase.test_naive_datetime."""
    with pytest.raises(
        InvalidTask, match=re.escape("run_after must be an aware datetime.")
    ):
        test_tasks.noop_task.using(run_after=datetime.now())


def test_invalid_priority():
    """Django TaskTestCase.test_invalid_priority."""
    message = (
        f"priority must be a whole number between {TASK_MIN_PRIORITY} and "
        f"{TASK_MAX_PRIORITY}."
    )
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match=message):
            test_tasks.noop_task.using(priority=priority)  # type: ignore[arg-type]
    for priority in (100, -100, 0):
        test_tasks.noop_task.using(priority=priority)


def test_unknown_queue_name():
    """Django TaskTestCase.test_unknown_queue_name."""
    with pytest.raises(
        InvalidTask, match=re.escape("Queue 'queue-2' is not valid for backend.")
    ):
        test_tasks.noop_task.using(queue_name="queue-2")
    # Validation is bypassed when the backend QUEUES is an empty list.
    assert (
        test_tasks.noop_task.using(queue_name="queue-2", backend="immediate").queue_name
        == "queue-2"
    )


def test_a_queue_name_must_also_be_a_job_queue_name(settings):
    """JobsBackend's own rule on top of Django's (X2): the task's queue_name is the
    job's queue, so it must be a queue name (^[a-z0-9][a-z0-9_.-]{0,62}$)."""
    settings.TASKS = {"default": {"BACKEND": JOBS_BACKEND, "QUEUES": []}}
    with pytest.raises(InvalidTask, match="queue_name"):
        test_tasks.noop_task.using(queue_name="Reports Queue")


def test_invalid_function():
    """Django TaskTestCase.test_invalid_function."""

    def local_function():
        pass

    for invalid_function in (any, local_function):
        with pytest.raises(
            InvalidTask,
            match=re.escape("Task function must be defined at a module level."),
        ):
            task()(invalid_function)


def test_takes_context_without_taking_context():
    """Django TaskTestCase.test_takes_context_without_taking_context."""
    with pytest.raises(
        InvalidTask,
        match=re.escape(
            "Task takes context but does not have a first argument of 'context'."
        ),
    ):
        task(takes_context=True)(test_tasks.calculate_meaning_of_life.func)


@DJANGO_ONLY
def test_run_after_in_decorator():
    """Django TaskTestCase.test_run_after_in_decorator."""
    with pytest.raises(TypeError, match="run_after cannot be defined statically"):
        task(run_after=timezone.now())(test_tasks.calculate_meaning_of_life.func)  # type: ignore[call-overload]


def test_validate_disallowed_async_task(monkeypatch):
    """Django test_dummy_backend.py test_validate_disallowed_async_task."""
    backend = task_backends["default"]
    monkeypatch.setattr(backend, "supports_async_task", False)
    with pytest.raises(InvalidTask, match=r"(?i)Backend does not support async Tasks"):
        backend.validate_task(test_tasks.noop_task_async)


def test_run_after_is_accepted():
    """Django test_immediate_backend.py test_cannot_pass_run_after, inverted: the
    backend supports run_after (supports_defer)."""
    default_task_backend.validate_task(
        test_tasks.failing_task_value_error.using(run_after=timezone.now())
    )


def test_get_backend():
    """Django TaskTestCase.test_get_backend."""
    assert test_tasks.noop_task.backend == "default"
    assert isinstance(test_tasks.noop_task.get_backend(), JobsBackend)
    immediate_task = test_tasks.noop_task.using(backend="immediate")
    assert immediate_task.backend == "immediate"
    assert isinstance(immediate_task.get_backend(), ImmediateBackend)


def test_name_and_module_path():
    """Django TaskTestCase.test_name and test_module_path."""
    assert test_tasks.noop_task.name == "noop_task"
    assert test_tasks.noop_task_async.name == "noop_task_async"
    assert test_tasks.noop_task.module_path == "tests.testapp.upstream_tasks.noop_task"
    for t in (test_tasks.noop_task, test_tasks.noop_task_async):
        assert import_string(t.module_path) is t


def test_call_task():
    """Django TaskTestCase.test_call_task, test_call_task_async,
    test_call_async_task and test_call_async_task_sync."""
    assert test_tasks.calculate_meaning_of_life.call() == 42
    assert run(test_tasks.calculate_meaning_of_life.acall) == 42
    assert run(test_tasks.noop_task_async.acall) is None
    assert test_tasks.noop_task_async.call() is None


@DJANGO_ONLY
def test_pickle_task():
    """Django TaskTestCase.test_pickle_task, test_unpickle_arbitrary_string and
    test_unpickle_non_task_object."""
    assert pickle.loads(pickle.dumps(test_tasks.noop_task)) == test_tasks.noop_task  # noqa: S301
    for path in ("does.not.exist.fake_task", "builtins.any"):
        with pytest.raises(ValueError, match=f"Expected '{path}' to point to a Task"):
            Task._reconstruct({"func": path})  # type: ignore[attr-defined]


def test_no_backends(settings):
    """Django TaskTestCase.test_no_backends."""
    settings.TASKS = {}
    with pytest.raises(InvalidTaskBackend):
        test_tasks.noop_task.enqueue()


# -- enqueue ------------------------------------------------------------------------


@pytest.mark.parametrize("t", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task(t, received):
    """Django TaskTestCase.test_enqueue_task, test_dummy_backend.py test_enqueue_task,
    backport DatabaseBackendTestCase.test_enqueue_task (ids are UUIDv7 here, H5)."""
    result = t.enqueue(1, two=3)
    assert uuid.UUID(result.id).version == 7
    assert_ready(result, t, [1], {"two": 3})
    assert received == [(JobsBackend, result)]
    assert default_task_backend.get_result(result.id) == result


@pytest.mark.parametrize("t", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task_async(t, received):
    """Django TaskTestCase.test_enqueue_task_async, test_dummy_backend.py
    test_enqueue_task_async, backport DatabaseBackendTestCase.test_enqueue_task_async."""
    result = run(t.aenqueue)
    assert uuid.UUID(result.id).version == 7
    assert_ready(result, t, [], {})
    assert received == [(JobsBackend, result)]


def test_enqueue_with_invalid_argument():
    """Django TaskTestCase.test_enqueue_with_invalid_argument and
    test_aenqueue_with_invalid_argument: refused before anything is written."""
    with pytest.raises(TypeError, match="Unsupported type"):
        test_tasks.noop_task.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        run(test_tasks.noop_task.aenqueue, datetime.now())
    assert not Job.objects.exists()


def test_enqueue_writes_one_job_and_reads_it_back():
    """Backport DatabaseBackendTestCase.test_enqueue_task and test_get_result count
    queries: enqueue is 2 here (the job's INSERT, then the row read back for its
    enqueued_at), get_result is 1."""
    with CaptureQueriesContext(connection) as enqueue:
        result = default_task_backend.enqueue(test_tasks.noop_task, [], {})
    with CaptureQueriesContext(connection) as get:
        new_result = default_task_backend.get_result(result.id)
    assert (len(enqueue), len(get)) == (2, 1)
    assert new_result == result


def test_enqueue_logs(caplog):
    """Django test_dummy_backend.py test_enqueue_logs, backport
    DatabaseBackendTestCase.test_enqueue_logs."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        result = test_tasks.noop_task.enqueue()
    [line] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert "enqueued" in line
    assert result.id in line


def test_errors():
    """Django test_dummy_backend.py test_errors."""
    assert test_tasks.noop_task.enqueue().errors == []


def test_takes_context_enqueues():
    """Django test_dummy_backend.py test_takes_context."""
    assert test_tasks.get_task_id.enqueue().status == TaskResultStatus.READY


def test_validate_on_enqueue(settings):
    """Django test_dummy_backend.py / test_immediate_backend.py test_validate_on_enqueue
    and test_validate_on_aenqueue, backport DatabaseBackendTestCase's two."""
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="queue_1")
    settings.TASKS = {"default": {"BACKEND": JOBS_BACKEND, "QUEUES": ["queue-1"]}}
    with pytest.raises(InvalidTask, match="Queue 'queue_1' is not valid for backend"):
        task_with_custom_queue_name.enqueue()
    with pytest.raises(InvalidTask, match="Queue 'queue_1' is not valid for backend"):
        run(task_with_custom_queue_name.aenqueue)


def test_run_after_tz(settings):
    """Backport DatabaseBackendTestCase.test_run_after_tz."""
    for use_tz in (True, False):
        settings.USE_TZ = use_tz
        result = test_tasks.noop_task.enqueue()
        assert default_task_backend.get_result(result.id).task.run_after is None


def test_priority_range_check():
    """Backport DatabaseBackendTestCase.test_priority_range_check: the job table
    holds Django's priority range (-100..100) and nothing else."""
    fields = {"name": "x", "idempotency_key": "k"}
    for priority in (-101, 101):
        with pytest.raises(IntegrityError), transaction.atomic():
            Job.objects.create(priority=priority, **fields)
    job = Job.objects.create(priority=3.1, **{**fields, "idempotency_key": "f"})
    job.refresh_from_db()
    assert job.priority == 3
    for priority in (100, -100, 0):
        Job.objects.create(priority=priority, **{**fields, "idempotency_key": priority})


# -- results ------------------------------------------------------------------------


def test_get_result():
    """Django TaskTestCase.test_get_result and test_get_result_async,
    test_dummy_backend.py test_get_result(_async), backport
    DatabaseBackendTestCase.test_get_result(_async)."""
    result = default_task_backend.enqueue(test_tasks.noop_task, [], {})
    assert test_tasks.noop_task.get_result(result.id) == result
    assert default_task_backend.get_result(result.id) == result
    assert run(test_tasks.noop_task.aget_result, result.id) == result
    assert run(default_task_backend.aget_result, result.id) == result


def test_get_missing_result():
    """Django TaskTestCase.test_get_missing_result, test_dummy_backend.py
    test_get_missing_result, backport DatabaseBackendTestCase.test_get_missing_result,
    test_async_get_missing_result, test_invalid_uuid and test_async_invalid_uuid."""
    for missing in ("123", str(uuid.uuid4())):
        with pytest.raises(TaskResultDoesNotExist):
            test_tasks.noop_task.get_result(missing)
        with pytest.raises(TaskResultDoesNotExist):
            run(test_tasks.noop_task.aget_result, missing)
        with pytest.raises(TaskResultDoesNotExist):
            run(default_task_backend.aget_result, missing)


def test_get_incorrect_result():
    """Django TaskTestCase.test_get_incorrect_result and
    test_get_incorrect_result_async."""
    result = default_task_backend.enqueue(test_tasks.noop_task_async, [], {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        run(test_tasks.noop_task.aget_result, result.id)


def test_refresh_result_unchanged():
    """Django TaskTestCase.test_refresh_result: refresh() and arefresh() of a result
    that did not change leave it equal."""
    result = run(test_tasks.noop_task.aenqueue)
    original = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == original
    run(result.arefresh)
    assert dataclasses.asdict(result) == original


@pytest.mark.parametrize("asynchronous", [False, True])
def test_refresh_result(asynchronous):
    """Backport DatabaseBackendTestCase.test_refresh_result(_async) (the row is
    changed under the result, as upstream does), Django test_dummy_backend.py
    test_refresh_result(_async)."""
    result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {})
    Job.objects.filter(pk=result.id).update(
        state="done",
        started_at=timezone.now(),
        finished_at=timezone.now(),
        result=42,
        attempt=1,
        worker_id="w-1",
    )
    assert_ready(result, test_tasks.calculate_meaning_of_life, [], {})
    with CaptureQueriesContext(connection) as queries:
        run(result.arefresh) if asynchronous else result.refresh()
    assert len(queries) == 1
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished is True
    assert result.return_value == 42
    assert result.attempts == 1


@DJANGO_ONLY
def test_pickle_task_result():
    """Django TaskTestCase.test_pickle_task_result."""
    result = test_tasks.noop_task.enqueue()
    assert pickle.loads(pickle.dumps(result)) == result  # noqa: S301


def test_invalid_task_path():
    """Backport DatabaseBackendTestCase.test_invalid_task_path: a stored path that
    names no Task is refused, never called."""
    answer = django_task.enqueue(
        task="subprocess.check_output",
        args=[["exit", "1"]],
        kwargs={},
        backend="default",
        call_id="c",
    )
    with pytest.raises(
        SuspiciousOperation,
        match=f"Task {answer.id} does not point to a Task \\(subprocess.check_output\\)",
    ):
        default_task_backend.get_result(str(answer.id))


def test_missing_task_path():
    """Backport DatabaseBackendTestCase.test_missing_task_path."""
    answer = django_task.enqueue(
        task="missing.func", args=[], kwargs={}, backend="default", call_id="c"
    )
    with pytest.raises(ImportError):
        default_task_backend.get_result(str(answer.id))


@pytest.mark.urls("tests.testapp.urls")
def test_meaning_of_life_view(client):
    """Backport test_database_backend.py / test_dummy_backend.py
    test_meaning_of_life_view (the sync and the async view)."""
    for url in (reverse("meaning-of-life"), reverse("meaning-of-life-async")):
        response = client.get(url)
        assert response.status_code == 200
        data = response.json()
        assert (data["result"], data["status"]) == (None, TaskResultStatus.READY)
        result = default_task_backend.get_result(data["result_id"])
        assert result.status == TaskResultStatus.READY


@pytest.mark.urls("tests.testapp.urls")
def test_get_result_from_different_request(client, jobs):
    """Backport test_database_backend.py / test_dummy_backend.py
    test_get_result_from_different_request; then the worker's answer, too."""
    result_id = client.get(reverse("meaning-of-life")).json()["result_id"]
    response = client.get(reverse("result", args=[result_id]))
    assert response.status_code == 200
    assert response.json() == {
        "result_id": result_id,
        "result": None,
        "status": TaskResultStatus.READY,
    }
    jobs.run()
    assert client.get(reverse("result", args=[result_id])).json()["result"] == 42
    assert client.get(reverse("result", args=[str(uuid.uuid4())])).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_cross_connection(second_connection):
    """Backport DatabaseTaskResultTestCase.test_cross_connection."""
    test_tasks.noop_task.enqueue()
    test_tasks.noop_task.enqueue()
    assert Job.objects.filter(name="ultimate_jobs.django_task").count() == 2
    with second_connection.cursor() as cursor:
        cursor.execute("SELECT id FROM ultimate_jobs_job")
        assert len(cursor.fetchall()) == 2


def test_dummy_doesnt_wait_until_transaction_commit_by_default():
    """Django test_dummy_backend.py DummyBackendTransactionTestCase.
    test_doesnt_wait_until_transaction_commit_by_default: inside the transaction the
    result has its enqueued_at and exists; it still exists after. (The job itself waits
    for the commit: see test_django_tasks.py, defect 1.)"""
    with transaction.atomic():
        result = test_tasks.noop_task.enqueue()
        assert result.enqueued_at is not None
        assert default_task_backend.get_result(result.id) == result
    assert default_task_backend.get_result(result.id).id == result.id


# -- running (ImmediateBackend's semantics, and the backport's db_worker cases) ------


@pytest.mark.parametrize("t", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_run_enqueued_task(t, jobs):
    """Django test_immediate_backend.py test_enqueue_task and test_enqueue_task_async,
    backport DatabaseBackendWorkerTestCase.test_run_enqueued_task."""
    result = t.enqueue(1, two=3)
    assert result.status == TaskResultStatus.READY
    jobs.run()
    assert result.status == TaskResultStatus.READY  # a stale copy until refresh()
    assert result.attempts == 0
    assert_ran(result, TaskResultStatus.SUCCESSFUL)
    assert result.return_value is None
    assert result.task == t
    assert (result.args, result.kwargs) == ([1], {"two": 3})
    assert not Job.objects.filter(state="ready").exists()


def test_result(jobs):
    """Django test_immediate_backend.py test_result and test_result_async."""
    results = [
        default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {}),
        run(
            default_task_backend.aenqueue, test_tasks.calculate_meaning_of_life, [], {}
        ),
    ]
    jobs.run()
    for result in results:
        result.refresh()
        assert (result.status, result.return_value) == (
            TaskResultStatus.SUCCESSFUL,
            42,
        )


@pytest.mark.parametrize(
    ("t", "exception", "message"),
    [
        (
            test_tasks.failing_task_value_error,
            ValueError,
            "This Task failed due to ValueError",
        ),
        (
            test_tasks.failing_task_system_exit,
            SystemExit,
            "This Task failed due to SystemExit",
        ),
    ],
)
def test_catches_exception(t, exception, message, jobs, caplog):
    """Django test_immediate_backend.py test_catches_exception, backport
    DatabaseBackendWorkerTestCase.test_failing_task and
    DatabaseWorkerProcessTestCase.test_system_exit_task (in this thread)."""
    result = t.enqueue()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        jobs.run()
    errors = [r for r in caplog.records if r.name == LOGGER]
    assert len(errors) == 1
    assert message in caplog.text  # the exception is on the ERROR line
    assert_ran(result, TaskResultStatus.FAILED)
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n")
    assert result.task == t
    assert (result.args, result.kwargs) == ([], {})
    assert not Job.objects.filter(state="ready").exists()


def test_throws_keyboard_interrupt(jobs, caplog):
    """Django test_immediate_backend.py test_throws_keyboard_interrupt: in the test's
    own thread a KeyboardInterrupt stops the run (a worker fails the task instead:
    tests/acceptance/test_django_tasks_worker.py)."""
    default_task_backend.enqueue(test_tasks.failing_task_keyboard_interrupt, [], {})
    with (
        caplog.at_level(logging.ERROR, logger=LOGGER),
        pytest.raises(KeyboardInterrupt),
    ):
        jobs.run()
    assert [r for r in caplog.records if r.name == LOGGER] == []


def test_complex_exception(jobs, caplog):
    """Django test_immediate_backend.py test_complex_exception, backport
    DatabaseBackendWorkerTestCase.test_complex_exception."""
    result = test_tasks.complex_exception.enqueue()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        jobs.run()
    assert any(r.name == LOGGER for r in caplog.records)
    assert_ran(result, TaskResultStatus.FAILED)
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert result._return_value is None  # type: ignore[attr-defined]
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback
    assert result.task == test_tasks.complex_exception
    assert (result.args, result.kwargs) == ([], {})


def test_complex_return_value(jobs, caplog):
    """Django test_immediate_backend.py test_complex_return_value, backport
    DatabaseBackendWorkerTestCase.test_complex_return_value (with Django's wording,
    "Unsupported type", where the backport's JSONField says "not JSON serializable")."""
    result = test_tasks.complex_return_value.enqueue()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        jobs.run()
    assert any(r.name == LOGGER for r in caplog.records)
    assert_ran(result, TaskResultStatus.FAILED)
    assert result._return_value is None  # type: ignore[attr-defined]
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback


def test_task_error_invalid_exception_and_unknown_module(jobs):
    """Django TaskTestCase.test_task_error_invalid_exception and
    test_task_error_unknown_module."""
    result = test_tasks.failing_task_value_error.enqueue()
    jobs.run()
    result.refresh()
    assert len(result.errors) == 1
    object.__setattr__(result.errors[0], "exception_class_path", "subprocess.run")
    with pytest.raises(
        ValueError, match=re.escape("'subprocess.run' does not reference a valid")
    ):
        _ = result.errors[0].exception_class
    object.__setattr__(result.errors[0], "exception_class_path", "does.not.exist")
    with pytest.raises(ImportError):
        _ = result.errors[0].exception_class


def test_enqueue_and_run_logs(jobs, caplog):
    """Django test_immediate_backend.py test_enqueue_logs, test_failed_logs and
    test_successful_task_no_none_in_logs: enqueued, RUNNING, then the ending."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        ok = test_tasks.noop_task.enqueue()
        jobs.run()
        failed = test_tasks.failing_task_value_error.enqueue()
        jobs.run()
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 6
    assert "enqueued" in lines[0]
    assert ok.id in lines[0]
    assert "state=RUNNING" in lines[1]
    assert ok.id in lines[1]
    assert "state=SUCCESSFUL" in lines[2]
    assert ok.id in lines[2]
    assert all("None" not in line for line in lines[:3])
    assert "state=RUNNING" in lines[4]
    assert failed.id in lines[4]
    assert "state=FAILED" in lines[5]
    assert failed.id in lines[5]


def test_takes_context(jobs):
    """Django test_immediate_backend.py test_takes_context and test_context, backport
    DatabaseBackendWorkerTestCase.test_takes_context and test_context."""
    result = test_tasks.get_task_id.enqueue()
    context = test_tasks.check_context.enqueue(1)
    jobs.run()
    result.refresh()
    assert result.return_value == result.id
    context.refresh()
    assert context.status == TaskResultStatus.SUCCESSFUL


def test_batch_processes_all_tasks(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_batch_processes_all_tasks."""
    for _ in range(3):
        test_tasks.noop_task.enqueue()
    test_tasks.failing_task_value_error.enqueue()
    assert Job.objects.filter(state="ready").count() == 4
    jobs.run()
    assert Job.objects.filter(state="ready").count() == 0
    assert Job.objects.filter(state="done").count() == 3
    assert Job.objects.filter(state="dead").count() == 1


def test_doesnt_process_different_queue(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_doesnt_process_different_queue."""
    result = test_tasks.noop_task.using(queue_name="queue_1").enqueue()
    assert Job.objects.filter(state="ready").count() == 1
    assert jobs.run(queues=["default"]) == []
    assert Job.objects.filter(state="ready").count() == 1
    jobs.run(queues=[result.task.queue_name])
    assert Job.objects.filter(state="ready").count() == 0


def test_run_after(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_run_after (the test clock moves
    instead of the row's run_after)."""
    result = test_tasks.noop_task.using(
        run_after=timezone.now() + timedelta(hours=10)
    ).enqueue()
    assert Job.objects.count() == 1
    assert Job.objects.filter(state="ready").count() == 0
    assert jobs.run() == []
    assert Job.objects.filter(state="done").count() == 0
    jobs.travel(hours=10, seconds=1)
    jobs.run()
    assert Job.objects.filter(state="done").count() == 1
    assert default_task_backend.get_result(result.id).status == "SUCCESSFUL"


def test_run_after_priority(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_run_after_priority: due tasks run by
    priority, then run_after; tasks not yet due do not run."""
    now = timezone.now()
    noop = test_tasks.noop_task
    old = noop.using(priority=20, run_after=now - timedelta(hours=2)).enqueue()
    very_old = noop.using(priority=20, run_after=now - timedelta(hours=10)).enqueue()
    noop.using(run_after=now + timedelta(hours=10)).enqueue()
    noop.using(priority=10, run_after=now + timedelta(hours=10)).enqueue()
    noop.using(run_after=now + timedelta(hours=2)).enqueue()
    high = noop.using(priority=10).enqueue()
    low = noop.using(priority=2).enqueue()
    lower = noop.using(priority=-2).enqueue()
    ran = [str(a.job_id) for a in jobs.run()]
    assert ran == [very_old.id, old.id, high.id, low.id, lower.id]


def test_unloadable_task_paths_fail_in_the_runner(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_invalid_task_path,
    test_missing_task_path and test_task_import_string."""
    ids = [
        django_task.enqueue(
            task=path, args=[], kwargs={}, backend="default", call_id=path
        ).id
        for path in (
            "subprocess.check_output",
            "missing.func",
            "tests.testapp.upstream_tasks.some_test",
        )
    ]
    jobs.run()
    rows = {j.pk: j for j in Job.objects.filter(pk__in=ids)}
    assert [rows[i].state for i in ids] == ["dead", "dead", "dead"]
    assert "ImportError" in rows[ids[2]].last_error


def test_worker_doesnt_exit(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_worker_doesnt_exit."""
    result = test_tasks.exit_task.enqueue()
    jobs.run()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED


@pytest.mark.django_db(transaction=True)
def test_worker_with_locked_rows(jobs, second_connection):
    """Backport DatabaseBackendWorkerTestCase.test_worker_with_locked_rows."""
    result_1 = test_tasks.noop_task.enqueue()
    with second_connection.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute("SELECT id FROM ultimate_jobs_job FOR UPDATE")
        assert len(cursor.fetchall()) == 1
        result_2 = test_tasks.noop_task.enqueue()
        jobs.run()
        cursor.execute("ROLLBACK")
    result_1.refresh()
    result_2.refresh()
    assert result_1.status == TaskResultStatus.READY
    assert result_2.status == TaskResultStatus.SUCCESSFUL


def test_max_tasks(jobs):
    """Backport DatabaseBackendWorkerTestCase.test_max_tasks."""
    results = [test_tasks.noop_task.enqueue() for _ in range(5)]
    jobs.run(max_jobs=2)
    for result in results:
        result.refresh()
    statuses = [r.status for r in results]
    assert statuses.count(TaskResultStatus.SUCCESSFUL) == 2
    assert statuses.count(TaskResultStatus.READY) == 3
