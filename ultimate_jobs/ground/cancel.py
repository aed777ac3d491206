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


# One lock for every token: a cancel and the first wait on a token are rare, so they
# share it; a token costs no lock and no Event until something waits on it (N2: a
# handler makes one per job, and an Event is a Condition and two locks).
_LOCK = threading.Lock()


class CancelToken:
    """Set once, with a reason, when the attempt must stop; bodies poll or wait on it."""

    __slots__ = ("_event", "_set", "reason")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None  # made by the first wait
        self.reason: str | None = None

    def cancel(self, reason: str) -> bool:
        """Set the token; answers False when it was already set (the first reason wins)."""
        with _LOCK:
            if self._set:
                return False
            self.reason = reason
            self._set = True
            event = self._event
        if event is not None:
            event.set()
        return True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the token is set or ``timeout`` passes; answers is_set()."""
        with _LOCK:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        event.wait(timeout)
        return self._set

    def raise_if_cancelled(self) -> None:
        """Raise JobAborted when the token is set."""
        if self._set:
            raise JobAborted(self.reason or "cancelled")

    def __repr__(self) -> str:
        return (
            f"<CancelToken {'set: ' + str(self.reason) if self.is_set() else 'clear'}>"
        )
