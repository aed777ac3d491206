"""One slot budget that the claim loops of one worker process share (Q1).

A worker serving queues on several database aliases runs one claim loop per alias; the
process still runs at most ``CONCURRENCY`` jobs at once. Each loop takes slots from the
share before its claim (``take``) and hands back what it did not fill; a finished job
hands its slot back (``give``), which wakes every loop, so a slot freed by a job of one
alias can be filled from another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SlotShare:
    """``size`` slots taken and given back by several claim loops."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a slot share holds at least one slot, not {size}")
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiters: list[Callable[[], None]] = []

    def on_free(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` whenever slots come free."""
        with self._lock:
            self._waiters.append(wake)

    def free(self) -> int:
        with self._lock:
            return self._free

    def take(self, wanted: int) -> int:
        """Take up to ``wanted`` slots; answer how many were taken."""
        with self._lock:
            taken = max(0, min(wanted, self._free))
            self._free -= taken
            return taken

    def give(self, count: int, *, wake: bool = True) -> None:
        """Hand ``count`` slots back; ``wake`` the loops (a job finished). Slots a
        claim did not fill go back silently: waking then would only spin idle loops."""
        if count <= 0:
            return
        with self._lock:
            self._free = min(self.size, self._free + count)
            waiters = list(self._waiters) if wake else []
        for waiter in waiters:
            waiter()
