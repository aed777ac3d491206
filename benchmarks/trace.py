"""Pickup stage stamps inside the worker (BENCH_TRACE=1; benchmarks/pickup_app.py).

Installed by the benchmark apps' ``ready()`` when BENCH_TRACE is 1: wraps, without
changing them, the worker's notification handler, the claimer's round and the pool's
submit, and appends ``<stage> <time ns>`` lines to ``trace-<pid>.txt`` in the record
directory. The stages of one pickup: ``notify`` (the LISTEN thread handed the
notification to the worker), ``claim0``/``claim1`` (the claim loop's round began and
answered), ``submit`` (a claimed row handed to the pool); the body's own record is the
start. Jobs are 20 ms apart and the worker is idle between them, so each body start
belongs to the stages just before it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_lock = threading.Lock()
_fd: int | None = None


def _stamp(stage: str) -> None:
    global _fd
    now = time.time_ns()
    with _lock:
        if _fd is None:
            path = os.path.join(
                os.environ["BENCH_RECORD_DIR"], f"trace-{os.getpid()}.txt"
            )
            _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_fd, b"%s %d\n" % (stage.encode(), now))


def install() -> None:
    if os.environ.get("BENCH_TRACE") != "1" or "BENCH_RECORD_DIR" not in os.environ:
        return
    from ultimate_jobs.runtime.claimer import Claimer
    from ultimate_jobs.runtime.pool import Pool
    from ultimate_jobs.runtime.worker import Worker

    notified = Worker._on_notification
    claim = Claimer.run_once
    submit = Pool.submit

    def on_notification(self: Any, queue: str) -> None:
        _stamp("notify")
        notified(self, queue)

    def run_once(self: Any, limit: int) -> Any:
        _stamp("claim0")
        rows = claim(self, limit)
        if rows:
            _stamp("claim1")
        return rows

    def pool_submit(self: Any, row: Any) -> None:
        _stamp("submit")
        submit(self, row)

    Worker._on_notification = on_notification  # type: ignore[method-assign]
    Claimer.run_once = run_once  # type: ignore[method-assign]
    Pool.submit = pool_submit  # type: ignore[method-assign]


def stages(
    record_dir: str, committed: dict[int, int], started: dict[int, int]
) -> dict[str, list[float]]:
    """Per job, ms from commit to each stage (the last of each kind before its start)."""
    events: list[tuple[int, str]] = []
    for name in os.listdir(record_dir):
        if name.startswith("trace-"):
            with open(os.path.join(record_dir, name)) as handle:
                for line in handle:
                    stage, ns = line.split()
                    events.append((int(ns), stage))
    events.sort()
    out: dict[str, list[float]] = {
        "notify": [],
        "claim0": [],
        "claim1": [],
        "submit": [],
    }
    for n, commit in committed.items():
        start = started.get(n)
        if start is None:
            continue
        seen: dict[str, int] = {}
        for ns, stage in events:
            if ns > start:
                break
            # the first notification from 5 ms before the stamp (the wake may beat the
            # enqueuer's stamp), then the first of each stage after it
            if (stage == "notify" and ns >= commit - 5_000_000) or "notify" in seen:
                seen.setdefault(stage, ns)
        for stage, ns in seen.items():
            out[stage].append((ns - commit) / 1e6)
    return out
