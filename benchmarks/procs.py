"""Starting, watching and stopping the worker processes under test.

Every worker is started in its own session (process group), so stopping it reaches the
children it forked (django-q2's cluster, `--processes`, several db_worker processes)
and nothing else. Memory and CPU are summed over the process tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

import psutil


class Group:
    """One or more worker processes started together, each in its own session."""

    def __init__(
        self, argvs: Sequence[Sequence[str]], env: dict[str, str], log_path: str
    ) -> None:
        self.log = open(log_path, "ab")
        self.popens = [
            subprocess.Popen(
                list(argv),
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            for argv in argvs
        ]
        self.peak_rss = 0
        self._sampling = False
        self._sampler: threading.Thread | None = None

    def processes(self) -> list[psutil.Process]:
        found = []
        for popen in self.popens:
            try:
                root = psutil.Process(popen.pid)
                found.append(root)
                found.extend(root.children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        return found

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.popens)

    def rss(self) -> int:
        total = 0
        for process in self.processes():
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue
        return total

    def cpu_seconds(self) -> float:
        total = 0.0
        for process in self.processes():
            try:
                times = process.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                continue
        return total

    def start_sampling(self, interval: float = 0.2) -> None:
        self._sampling = True

        def sample() -> None:
            while self._sampling:
                self.peak_rss = max(self.peak_rss, self.rss())
                time.sleep(interval)

        self._sampler = threading.Thread(target=sample, daemon=True)
        self._sampler.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._sampling = False
        if self._sampler:
            self._sampler.join()
        for popen in self.popens:
            if popen.poll() is None:
                try:
                    os.killpg(popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for popen in self.popens:
            try:
                popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # whatever the group left behind
                os.killpg(popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            popen.wait()
        self.log.close()
