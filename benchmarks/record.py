"""What every benchmark job body does: append ``<n> <start ns>`` to a per-process file.

One no-op job for every system, so the only difference measured is the queue. The
orchestrator reads the files afterwards: each ``n`` exactly once proves the drain ran
each job once; the timestamp gives pickup latency (cross-process, wall clock of one
machine) and the drain's first-to-last span. ``os.write`` on an ``O_APPEND`` descriptor
is atomic for a line this short, so threads and forked processes never interleave.
"""

from __future__ import annotations

import os
import time

ENV = "BENCH_RECORD_DIR"
_fd: int | None = None
_pid = 0


def record(n: int) -> None:
    global _fd, _pid
    if _fd is None or _pid != os.getpid():
        _pid = os.getpid()
        path = os.path.join(os.environ[ENV], f"{_pid}.rec")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, b"%d %d\n" % (n, time.time_ns()))


class Records:
    """Reads a record directory incrementally."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self.items: list[tuple[int, int]] = []

    def poll(self) -> int:
        """Read what was appended since the last call; answer the total count."""
        for name in os.listdir(self.directory):
            if not name.endswith(".rec"):
                continue
            path = os.path.join(self.directory, name)
            with open(path, "rb") as handle:
                handle.seek(self._offsets.get(name, 0))
                data = self._partial.pop(name, b"") + handle.read()
                self._offsets[name] = handle.tell()
            lines = data.split(b"\n")
            if lines[-1]:
                self._partial[name] = lines[-1]
            for line in lines[:-1]:
                n, t = line.split()
                self.items.append((int(n), int(t)))
        return len(self.items)
