"""django.tasks on a real ``manage.py jobs_worker`` (X2): the django-tasks backport's
database-backend worker tests (``DatabaseWorkerProcessTestCase`` and the worker cases
of ``DatabaseBackendWorkerTestCase``, from the last release that shipped them), written
again for JobsBackend, plus the issue 19 regressions that need a worker process.

Deadlines are derived from the settings the workers run with: work that a live handler
thread finishes must finish well inside one LEASE, so a lapsed lease (the recovery of a
stuck run) can never make a test pass.
"""

from __future__ import annotations

import signal

import pytest

from tests.conftest import wait_for
from tests.taskapi import TaskResultStatus
from tests.testapp.jobs import exits
from tests.testapp.upstream_tasks import (
    calculate_meaning_of_life,
    exit_task,
    failing_task_keyboard_interrupt,
    failing_task_system_exit,
    failing_task_value_error,
    hang,
    noop_task,
    sleep_for,
)
from ultimate_jobs.backend import django_task
from ultimate_jobs.conf import get_settings
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

FINISHED = ("done", "dead", "failed", "cancelled")


def within_a_lease() -> float:
    """A deadline for work a live worker does at once: half the configured LEASE."""
    return get_settings().LEASE / 2


def finished(*ids) -> bool:
    states = dict(Job.objects.filter(pk__in=ids).values_list("pk", "state"))
    return len(states) == len(ids) and all(s in FINISHED for s in states.values())


def status_of(result):
    result.refresh()
    return result.status


# -- issue 19, defect 3 ------------------------------------------------------------


def test_system_exit_and_keyboard_interrupt_never_take_a_handler_thread(start_worker):
    """Defect 3 (X2, W9): tasks and plain @job bodies that raise SystemExit or
    KeyboardInterrupt end FAILED with that exception, and the worker keeps every slot:
    twice as many of them as slots, then a normal task, all finish inside half a lease.
    Also the backport's DatabaseWorkerProcessTestCase.test_system_exit_task and
    test_keyboard_interrupt_task."""
    worker = start_worker("--concurrency", "2")
    results = [
        failing_task_system_exit.enqueue(),
        failing_task_keyboard_interrupt.enqueue(),
        exit_task.enqueue(),
    ]
    plain = [
        exits.enqueue(key="exit-1", how="system-exit"),
        exits.enqueue(key="interrupt-1", how="keyboard-interrupt"),
    ]
    last = calculate_meaning_of_life.enqueue()
    ids = [r.id for r in results] + [str(p.id) for p in plain] + [last.id]
    wait_for(
        lambda: finished(*ids),
        timeout=within_a_lease(),
        message="every job finished by the worker's two handler threads",
    )
    assert [status_of(r) for r in results] == [TaskResultStatus.FAILED] * 3
    assert [r.errors[0].exception_class for r in results] == [
        SystemExit,
        KeyboardInterrupt,
        SystemExit,
    ]
    assert (
        results[0]
        .errors[0]
        .traceback.endswith("SystemExit: This Task failed due to SystemExit\n")
    )
    rows = [Job.objects.get(pk=p.id) for p in plain]
    assert [(j.state, j.last_error.split(":")[0]) for j in rows] == [
        ("dead", "builtins.SystemExit"),
        ("dead", "builtins.KeyboardInterrupt"),
    ]
    assert (status_of(last), last.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert worker.proc.poll() is None
    assert "Exception in thread" not in worker.log()
    worker.terminate()
    assert worker.wait(within_a_lease()) == 0


def test_unloadable_task_paths_fail_and_the_worker_carries_on(start_worker):
    """Defect 4 (X2) in a worker, and the backport's DatabaseBackendWorkerTestCase.
    test_invalid_task_path, test_missing_task_path and test_task_import_string: the
    jobs end FAILED, the task_finished receiver logs instead of raising, and the
    next task runs."""
    paths = ("subprocess.check_output", "missing.func", "tests.testapp.gone.task")
    ids = [
        str(
            django_task.enqueue(
                task=path,
                args=[["exit", "1"]],
                kwargs={},
                backend="default",
                call_id=path,
            ).id
        )
        for path in paths
    ]
    last = calculate_meaning_of_life.enqueue()
    worker = start_worker("--concurrency", "1")
    wait_for(
        lambda: finished(*ids, last.id),
        timeout=within_a_lease(),
        message="the three unloadable tasks and the last one finished",
    )
    assert [Job.objects.get(pk=i).state for i in ids] == ["dead"] * 3
    assert (status_of(last), last.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    wait_for(
        lambda: worker.log().count("jobs.task.unloadable") == 3,
        timeout=within_a_lease(),
        message="three jobs.task.unloadable lines",
    )
    log = worker.log()
    assert "jobs.attempt.crashed" not in log


def test_the_failed_task_error_line_carries_the_exception(start_worker):
    """Defect 5 (X2) in a worker: django.tasks' ERROR line for a FAILED task has the
    task's traceback (the worker prints it on stderr; the test settings configure no
    logging, so Python's last-resort handler writes it)."""
    result = failing_task_value_error.enqueue()
    worker = start_worker("--concurrency", "1")
    line = (
        f"Task id={result.id} path={failing_task_value_error.module_path} state=FAILED"
    )
    # Sent once the row is settled: wait for the line itself, not for the row.
    worker.wait_log(line, timeout=within_a_lease())
    log = worker.log()
    after = log[log.index(line) :]
    assert after.split("\n")[1] == "Traceback (most recent call last):"
    assert "ValueError: This Task failed due to ValueError" in after


# -- the backport's DatabaseWorkerProcessTestCase, on jobs_worker --------------------


def test_run_subprocess(start_worker):
    """Backport DatabaseWorkerProcessTestCase.test_run_subprocess (--max-jobs 1 where
    db_worker has --batch)."""
    result = noop_task.enqueue()
    worker = start_worker("--max-jobs", "1")
    assert worker.wait(within_a_lease()) == 0
    assert result.status == TaskResultStatus.READY
    assert status_of(result) == TaskResultStatus.SUCCESSFUL


def test_interrupt_no_tasks(start_worker):
    """Backport DatabaseWorkerProcessTestCase.test_interrupt_no_tasks."""
    worker = start_worker()
    worker.terminate()
    assert worker.wait(within_a_lease()) == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_signals(start_worker, signum):
    """Backport DatabaseWorkerProcessTestCase.test_interrupt_signals: a signal while a
    task runs lets it finish (DRAIN_TIMEOUT), then the worker exits 0."""
    result = sleep_for.enqueue(2)
    assert result.attempts == 0
    worker = start_worker()
    wait_for(lambda: status_of(result) == TaskResultStatus.RUNNING)
    assert result.attempts == 1
    worker.signal(signum)
    assert worker.wait(get_settings().DRAIN_TIMEOUT) == 0
    assert status_of(result) == TaskResultStatus.SUCCESSFUL


def test_repeat_ctrl_c(start_worker):
    """Backport DatabaseWorkerProcessTestCase.test_repeat_ctrl_c, with this worker's
    documented difference: the second Ctrl-C cuts the drain and hands the task back
    to the queue (READY, its attempt counted) where db_worker fails it (SystemExit)."""
    result = hang.enqueue()
    worker = start_worker("--worker-id", "ctrl-c")
    wait_for(lambda: status_of(result) == TaskResultStatus.RUNNING)
    assert Job.objects.get(pk=result.id).worker_id == "ctrl-c"
    worker.signal(signal.SIGINT)
    worker.wait_log("jobs.process.draining")
    assert worker.proc.poll() is None
    assert status_of(result) == TaskResultStatus.RUNNING
    worker.signal(signal.SIGINT)
    assert worker.wait(within_a_lease()) == 0
    assert "jobs.process.drain-cut" in worker.log()
    assert status_of(result) == TaskResultStatus.READY
    assert Job.objects.get(pk=result.id).attempt == 1


def test_kill(start_worker):
    """Backport DatabaseWorkerProcessTestCase.test_kill: after SIGKILL the task shows
    RUNNING; here it does not stay so (upstream's open TODO): once its lease lapses the
    next claim fails it (W5: django.tasks has no retries)."""
    result = hang.enqueue()
    worker = start_worker(LEASE="2s")
    wait_for(lambda: status_of(result) == TaskResultStatus.RUNNING)
    worker.kill()
    assert worker.proc.returncode == -signal.SIGKILL
    assert status_of(result) == TaskResultStatus.RUNNING
    start_worker(LEASE="2s")
    wait_for(lambda: finished(result.id), timeout=2 + within_a_lease())
    assert status_of(result) == TaskResultStatus.FAILED
    assert result.errors[0].traceback == "LEASE_LAPSED_FINAL_ATTEMPT"


def test_multiple_workers(start_worker):
    """Backport DatabaseWorkerProcessTestCase.test_multiple_workers: ten tasks, three
    workers, each task run once (one start and one ending in all the logs)."""
    results = [sleep_for.enqueue(0.1) for _ in range(10)]
    # -v 2: an attempt's start and a success are DEBUG lines (N2).
    workers = [start_worker("--concurrency", "1", "-v", "2") for _ in range(3)]
    wait_for(
        lambda: finished(*[r.id for r in results]),
        timeout=within_a_lease(),
        message="ten tasks run by three workers",
    )
    for worker in workers:
        worker.terminate()
    assert [w.wait(within_a_lease()) for w in workers] == [0, 0, 0]
    for result in results:
        assert status_of(result) == TaskResultStatus.SUCCESSFUL
        assert result.attempts == 1
    logs = "".join(w.log() for w in workers)
    for result in results:
        ran = [
            line
            for line in logs.splitlines()
            if f"job_id={result.id}" in line and "jobs.attempt." in line
        ]
        assert len(ran) == 2, ran
