"""A local timer for work this process knows will be due soon (S3, R1).

A retry backing off for a second or a run sleeping for ten is due before the idle poll
would look again, and nothing announces it (no enqueue happens). The worker notes when
each such job comes due (``due_in``, measured on the database's clock by the statement
that parked it) and this timer calls ``wake`` at the earliest of those moments, so the
claim loop takes the job on time without waiting for the poll. Moments beyond
``horizon`` are left to the poll: the timer holds only what is due within a minute.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable

HORIZON = 60.0  # seconds: wakes further out are left to the poll


class WakeTimer:
    """One thread that calls ``wake()`` when each noted moment comes."""

    def __init__(self, wake: Callable[[], None], *, horizon: float = HORIZON) -> None:
        self.wake = wake
        self.horizon = horizon
        self._due: list[float] = []  # monotonic moments, a heap
        self._changed = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def wake_in(self, seconds: float) -> bool:
        """Call ``wake`` in ``seconds``; answers False (and does nothing) past the horizon."""
        if seconds > self.horizon:
            return False
        with self._changed:
            if self._stopped:
                return False
            heapq.heappush(self._due, time.monotonic() + max(seconds, 0.0))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jobs-wake-timer", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return True

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopped:
                    if not self._due:
                        self._changed.wait()
                        continue
                    wait = self._due[0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._changed.wait(wait)
                if self._stopped:
                    return
                now = time.monotonic()
                while self._due and self._due[0] <= now:
                    heapq.heappop(self._due)
            self.wake()
