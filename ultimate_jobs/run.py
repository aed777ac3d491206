"""The run context: the first parameter of every job function.

A ``Run`` describes one attempt of one job (ids, input, attempt, tenant, correlation id)
and carries its ``CancelToken``, which the worker sets when the attempt must stop: the
worker is draining (``DRAINING``), the lease was lost (``LEASE_LOST``), an operator
cancelled the job (``CANCELLED``) or a deadline passed (``TIMEOUT``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.exceptions import JobAborted

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


@dataclass(eq=False)
class Run:
    """One attempt of one job, as its body sees it."""

    job_id: uuid.UUID
    run_id: uuid.UUID
    name: str
    input: dict[str, Any]
    attempt: int
    max_attempts: int
    tenant_id: str | None
    enqueued_by: str = ""
    correlation_id: str = ""
    queue: str = "default"
    cancel_token: CancelToken = field(default_factory=CancelToken)
    logger: logging.LoggerAdapter[logging.Logger] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.logger = logging.LoggerAdapter(
            logging.getLogger("ultimate_jobs.run"),
            {
                "job_id": str(self.job_id),
                "run_id": str(self.run_id),
                "job_name": self.name,
                "attempt": self.attempt,
                "tenant_id": self.tenant_id,
                "correlation_id": self.correlation_id,
            },
        )

    @property
    def final_attempt(self) -> bool:
        """True when a failure now would not be retried for want of attempts (R3)."""
        return self.attempt >= self.max_attempts

    @property
    def cancelled(self) -> bool:
        """The same as ``run.cancel_token.is_set()``."""
        return self.cancel_token.is_set()
