"""``jobs_worker --processes P``: supervise P worker processes (W7).

Each child is the same command line without ``--processes`` and ``--metrics-port`` (the
supervisor serves its children's merged metrics, exposition.py). A child that dies while
the supervisor is not stopping is restarted (with a short backoff when it keeps dying).
The first SIGTERM/SIGINT is forwarded to every child (each drains), a second one too
(each ends its drain at once); the supervisor exits when every child has.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

logger = logging.getLogger(__name__)


# Options only the supervisor acts on: the children must not fork again, and the
# supervisor alone serves the merged metrics (exposition.py).
SUPERVISOR_OPTIONS = ("--processes", "--metrics-port")


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

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        starts = [0.0] * self.processes
        for index in range(self.processes):
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
        child = subprocess.Popen(self.command)  # noqa: S603 - our own command line
        self.children[index] = child
        logger.info(
            "jobs.supervisor.child-started", extra={"pid": child.pid, "slot": index}
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        self._stopping.set()
        for child in self.children:
            if child is not None and child.poll() is None:
                child.send_signal(signum)


def supervise(processes: int) -> int:
    """Run ``processes`` copies of the current command line (minus --processes)."""
    command = child_command(sys.orig_argv)
    return Supervisor(command, processes).run()
