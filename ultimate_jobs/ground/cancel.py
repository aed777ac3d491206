"""The cancel token (W4): set once, with a reason, when an attempt must stop.

The worker sets it when it drains (``DRAINING``), when the lease was lost
(``LEASE_LOST``), when an operator cancelled the job (``CANCELLED``) or when a deadline
passed (``TIMEOUT``); a body polls it (``run.cancelled``) or waits on it, and every
durable verb checks it.
"""

from __future__ import annotations

import threading

from ultimate_jobs.ground.exceptions import JobAborted

DRAINING = "DRAINING"
LEASE_LOST = "LEASE_LOST"
CANCELLED = "CANCELLED"
TIMEOUT = "TIMEOUT"


class CancelToken:
    """Set once, with a reason, when the attempt must stop; bodies poll or wait on it."""

    __slots__ = ("_event", "_lock", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.reason: str | None = None

    def cancel(self, reason: str) -> bool:
        """Set the token; answers False when it was already set (the first reason wins)."""
        with self._lock:
            if self._event.is_set():
                return False
            self.reason = reason
            self._event.set()
            return True

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the token is set or ``timeout`` passes; answers is_set()."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise JobAborted when the token is set."""
        if self._event.is_set():
            raise JobAborted(self.reason or "cancelled")

    def __repr__(self) -> str:
        return (
            f"<CancelToken {'set: ' + str(self.reason) if self.is_set() else 'clear'}>"
        )
