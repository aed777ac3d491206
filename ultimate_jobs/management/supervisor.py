"""``jobs_worker --processes P``: supervise P worker processes (W7).

Each child is the same command line without ``--processes`` and ``--metrics-port`` (the
supervisor serves its children's merged metrics, exposition.py). A child that dies while
the supervisor is not stopping is restarted (with a short backoff when it keeps dying).
The first SIGTERM/SIGINT is forwarded to every child (each drains), a second one too
(each ends its drain at once); the supervisor exits when every child has. A signal
that arrives while the children are being started stops the starting: no child is
started after it (a large fleet stops promptly, issue 31).

The supervisor owns its children: they die with it even when it is SIGKILLed (issue
31). Two mechanisms, either one enough: on Linux each child asks the kernel for a
SIGTERM when its parent dies (``PR_SET_PDEATHSIG`` through ``prctl``), and on every
system each child watches the read end of a pipe whose write end only the supervisor
holds: when the supervisor dies, the pipe reads end-of-file and the child stops as if
told by SIGTERM (it drains, then exits). ``watch_supervisor`` is the child's half.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

logger = logging.getLogger(__name__)


# Options only the supervisor acts on: the children must not fork again, and the
# supervisor alone serves the merged metrics (exposition.py).
SUPERVISOR_OPTIONS = ("--processes", "--metrics-port")
# "PID:FD": the supervisor's pid and the pipe's read end a child watches.
SUPERVISOR_ENV = "JOBS_WORKER_SUPERVISOR"  # not ULTIMATE_JOBS_*: no setting
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def child_command(argv: Sequence[str]) -> list[str]:
    """The command line of one child: ``argv`` without ``--processes N`` and
    ``--metrics-port PORT``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in SUPERVISOR_OPTIONS:
            skip = True
            continue
        if arg.startswith(tuple(f"{option}=" for option in SUPERVISOR_OPTIONS)):
            continue
        out.append(arg)
    return out


class Supervisor:
    """Keeps ``processes`` children running until told to stop."""

    def __init__(self, command: Sequence[str], processes: int) -> None:
        self.command = list(command)
        self.processes = processes
        self.children: list[subprocess.Popen[bytes] | None] = [None] * processes
        self._stopping = threading.Event()
        self._signals = 0
        self._signum = signal.SIGTERM
        # The children watch ``_watched``; the supervisor alone holds ``_held``, so
        # the pipe reads end-of-file in the children when the supervisor dies.
        self._watched, self._held = os.pipe()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        starts = [0.0] * self.processes
        for index in range(self.processes):
            if self._stopping.is_set():  # told to stop while starting: start no more
                break
            self._start(index)
            starts[index] = time.monotonic()
        while not self._stopping.is_set():
            for index, child in enumerate(self.children):
                if child is None or child.poll() is None or self._stopping.is_set():
                    continue
                logger.error(
                    "jobs.supervisor.child-died",
                    extra={"pid": child.pid, "returncode": child.returncode},
                )
                if time.monotonic() - starts[index] < 5:
                    self._stopping.wait(
                        1.0
                    )  # a child that dies at once is not restarted in a loop
                if not self._stopping.is_set():
                    self._start(index)
                    starts[index] = time.monotonic()
            self._stopping.wait(0.2)
        codes = [child.wait() for child in self.children if child is not None]
        logger.info("jobs.supervisor.stopped", extra={"returncodes": codes})
        return 0

    def _start(self, index: int) -> None:
        env = dict(os.environ)
        env[SUPERVISOR_ENV] = f"{os.getpid()}:{self._watched}"
        child = subprocess.Popen(  # noqa: S603 - our own command line
            self.command, env=env, pass_fds=(self._watched,)
        )
        self.children[index] = child
        if self._stopping.is_set():
            # The signal arrived while this child was being forked, before the
            # handler could see it: it is told now, like the others.
            child.send_signal(self._signum)
        logger.info(
            "jobs.supervisor.child-started", extra={"pid": child.pid, "slot": index}
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        self._signum = signal.Signals(signum)
        self._stopping.set()
        for child in self.children:
            if child is not None and child.poll() is None:
                child.send_signal(signum)


def supervise(processes: int) -> int:
    """Run ``processes`` copies of the current command line (minus --processes)."""
    command = child_command(sys.orig_argv)
    return Supervisor(command, processes).run()


def _parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch(fd: int, on_gone: Callable[[], None]) -> None:
    try:
        while os.read(fd, 1):  # the supervisor never writes: only EOF returns
            pass
    except OSError:
        pass
    on_gone()


def watch_supervisor(
    on_gone: Callable[[], None] | None = None, *, env: Mapping[str, str] | None = None
) -> bool:
    """In a child of ``Supervisor``: stop (SIGTERM to itself, so it drains as told)
    when the supervisor dies. Answers whether this process is such a child."""
    value = (os.environ if env is None else env).get(SUPERVISOR_ENV)
    if not value:
        return False
    pid_text, _, fd_text = value.partition(":")
    try:
        parent, fd = int(pid_text), int(fd_text)
    except ValueError:
        return False

    def stop() -> None:
        logger.error("jobs.supervisor.gone", extra={"supervisor_pid": parent})
        os.kill(os.getpid(), signal.SIGTERM)

    action = on_gone or stop
    _parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request above took effect
        action()
        return True
    threading.Thread(
        target=_watch, args=(fd, action), name="supervisor-watch", daemon=True
    ).start()
    return True
