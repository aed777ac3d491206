"""django.tasks on a real ``manage.py jobs_worker`` (X2): the django-tasks backport's
database-backend worker tests (``DatabaseWorkerProcessTestCase`` and the worker cases
of ``DatabaseBackendWorkerTestCase``, from the last release that shipped them), written
again for JobsBackend, plus the issue 19 regressions that need a worker process.

Deadlines are derived from the settings the workers run with: work that a live handler
thread finishes must finish well inside one LEASE, so a lapsed lease (the recovery of a
stuck run) can never make a test pass.
"""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.taskapi import TaskResultStatus
from tests.testapp.jobs import exits
from tests.testapp.upstream_tasks import (
    calculate_meaning_of_life,
    exit_task,
    failing_task_keyboard_interrupt,
    failing_task_system_exit,
)
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
    twice as many of them as slots, then a normal task, all finish inside half a lease."""
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
