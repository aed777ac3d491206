"""The held runs: the one ledger a worker's parts share (W2, W4, W6).

A run is held from the claim that took it until its handler thread let it go. The
claimer reads the ledger to size the next claim (W2, L3), the heartbeat renews what it
holds (W4), the pool adds and removes runs, and the drain waits for it to empty (W6).
The ledger owns the one lock and the condition they all use; nothing else locks.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ultimate_jobs.ground.cancel import CancelToken
from ultimate_jobs.sql.rows import ClaimedJob


@dataclass(eq=False)
class Held:
    """A job this worker claimed and has not settled yet."""

    row: ClaimedJob
    token: CancelToken = field(default_factory=CancelToken)
    # When the last renewal landed (monotonic clock).
    renewed_at: float = field(default_factory=time.monotonic)
    settling: bool = False  # the body ended; its outcome is being written
    # Failed at its deadline while the body runs on, ignoring its token (S6): its
    # handler thread is lost capacity until the body returns.
    overrun: bool = False


class Ledger:
    """The runs one worker holds, behind one lock; a condition says when one left."""

    def __init__(self) -> None:
        self._held: dict[uuid.UUID, Held] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def __contains__(self, job_id: object) -> bool:
        with self._lock:
            return job_id in self._held

    def add(self, row: ClaimedJob) -> Held:
        entry = Held(row)
        with self._lock:
            self._held[row["id"]] = entry
        return entry

    def remove(self, entry: Held) -> None:
        with self._lock:
            self._held.pop(entry.row["id"], None)
            self._changed.notify_all()

    def entries(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def rows(self) -> list[ClaimedJob]:
        with self._lock:
            return [entry.row for entry in self._held.values()]

    def ids(self) -> list[uuid.UUID]:
        with self._lock:
            return list(self._held)

    def unsettled(self) -> list[Held]:
        """The runs whose bodies still run: the heartbeat renews these (W4)."""
        with self._lock:
            return [entry for entry in self._held.values() if not entry.settling]

    def overrun_ids(self) -> list[uuid.UUID]:
        """The jobs whose bodies ran past their deadline and still hold a thread."""
        with self._lock:
            return [job_id for job_id, entry in self._held.items() if entry.overrun]

    def live(self, entry: Held) -> bool:
        """Whether ``entry`` is held and its body still runs (not settling)."""
        with self._lock:
            return not entry.settling and entry.row["id"] in self._held

    def settling(self, entry: Held) -> None:
        """From here the heartbeat neither renews nor reports ``entry`` (W4)."""
        with self._lock:
            entry.settling = True

    def overran(self, entry: Held) -> None:
        with self._lock:
            entry.overrun = True

    def free(self, count: Callable[[list[ClaimedJob]], int]) -> int:
        """``count`` of the held rows, asked under the lock (a budget's free room)."""
        with self._lock:
            return count([entry.row for entry in self._held.values()])

    def notify(self) -> None:
        """Wake whoever waits for the ledger (a second signal ends the drain)."""
        with self._lock:
            self._changed.notify_all()

    def wait_empty(self, deadline: float, stop: threading.Event) -> list[Held]:
        """Wait until nothing is held, ``deadline`` (monotonic) passes or ``stop`` is
        set; answer the runs still unsettled then."""
        with self._lock:
            while self._held and not stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(min(remaining, 0.5))
            return [entry for entry in self._held.values() if not entry.settling]
