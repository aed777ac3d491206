"""A ``jobs_worker --processes`` supervisor owns its children (W7, issue 31 item 2):
SIGKILLed, it leaves no orphan (each child sees the pipe it watches close, or gets its
parent-death signal, and drains and exits); a SIGTERM while it is still starting its
children stops it promptly with no child started after the signal."""

from __future__ import annotations

import re
import signal
import time

import psutil
import pytest

from tests.conftest import start_deadline, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ORPHAN_DEADLINE = 30.0  # an idle child drains at once; the lease is far longer


def children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pid_alive(pid: int) -> bool:
    try:
        return alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def test_a_sigkilled_supervisor_leaves_no_orphan(start_worker):
    supervisor = start_worker(
        "--roles", "worker", "--queues", "default", "--concurrency", "1",
        "--processes", "2", wait_ready=False,
    )  # fmt: skip
    wait_for(
        lambda: supervisor.log().count("jobs.worker.started") == 2,
        timeout=start_deadline(),
    )
    kids = children(supervisor.pid)
    assert len(kids) == 2
    supervisor.kill()  # SIGKILL: no handler runs, nothing is forwarded
    started = time.monotonic()
    wait_for(
        lambda: not any(alive(k) for k in kids),
        timeout=ORPHAN_DEADLINE,
        message="the children of a SIGKILLed supervisor to exit",
    )
    assert time.monotonic() - started < ORPHAN_DEADLINE


def test_sigterm_while_starting_starts_no_more_children(start_worker):
    supervisor = start_worker(
        "--roles", "worker", "--queues", "default", "--concurrency", "1",
        "--processes", "8", wait_ready=False,
    )  # fmt: skip
    # Its first child started (its own log says so), not just any child process:
    # Django's start-up in the supervisor may run one of its own before the signal
    # handlers are in place (croniter's import runs `file -b` through platform), and a
    # SIGTERM then ends the supervisor by default, exit -15 (the flake of stop 27).
    wait_for(
        lambda: "jobs.supervisor.child-started" in supervisor.log(),
        timeout=start_deadline(),
    )
    supervisor.terminate()
    assert supervisor.wait(timeout=start_deadline()) == 0
    # Every child the supervisor started, before or after the signal, is gone.
    pids = [int(p) for p in re.findall(r"child-started.*?pid=(\d+)", supervisor.log())]
    assert pids
    wait_for(
        lambda: not any(pid_alive(p) for p in pids),
        timeout=ORPHAN_DEADLINE,
    )


def test_sigint_and_sigterm_stop_a_fleet_promptly(start_worker):
    supervisor = start_worker(
        "--roles", "worker", "--queues", "default", "--concurrency", "1",
        "--processes", "3", wait_ready=False,
    )  # fmt: skip
    wait_for(
        lambda: supervisor.log().count("jobs.worker.started") == 3,
        timeout=start_deadline(),
    )
    kids = children(supervisor.pid)
    supervisor.signal(signal.SIGINT)
    assert supervisor.wait(timeout=start_deadline()) == 0
    assert not any(alive(k) for k in kids)
