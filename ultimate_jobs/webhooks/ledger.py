"""The webhook ledger: where every delivery attempt is recorded, and the one place that
decides whether an endpoint is disabled (F5).

``WebhookLedger`` is a seam (a Protocol): retention is seven years for one business and
thirty days for the next, so an app may keep its deliveries in its own tables. Two
implementations ship:

- ``DatabaseWebhookLedger``: the tables ``ultimate_jobs_webhook_delivery`` and
  ``ultimate_jobs_webhook_endpoint`` (webhook_models.py), written with the named
  statements of sql/webhooks.sql. Its rows are kept until ``trim`` deletes them.
- ``MemoryWebhookLedger``: one process's memory, for tests and development; the
  attempts are a bounded ring.

The contract a ledger keeps, and why:

- ``record`` is called for every attempt BEFORE the attempt's outcome is written and
  answers the endpoint's consecutive failures after it: a failure the ledger cannot see
  is a failure the streak cannot count, which is an endpoint never disabled.
- ``is_disabled`` is asked before every request and answers from what ``disable`` wrote:
  a verdict nobody asks for again is an endpoint that keeps receiving POSTs.
- only ``enable`` (a person: the admin action, a management shell) clears a disable;
  a success never does. An endpoint that re-enabled itself would be a retry loop with
  no end.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.sql import QUERIES


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One delivery attempt as the ledger records it: never the URL or the secret."""

    endpoint_id: str
    event_id: str
    topic: str
    ok: bool
    status: int | None = None  # the HTTP status; None when nothing answered
    error: str = ""  # why it failed, bounded; "" on success
    retry_after: float | None = None  # seconds the receiver asked to wait
    duration: float = 0.0  # seconds on the wire
    job_id: Any = None
    attempt: int = 0
    tenant_id: str | None = None


@runtime_checkable
class WebhookLedger(Protocol):
    """Where deliveries are recorded and endpoints disabled; see the module docstring."""

    def is_disabled(self, endpoint_id: str) -> bool:
        """True while the endpoint is disabled (asked before every request)."""
        ...

    def record(self, attempt: DeliveryAttempt) -> int:
        """Store one attempt; answer the endpoint's consecutive failures after it."""
        ...

    def disable(self, endpoint_id: str, reason: str) -> None:
        """Disable the endpoint; the first reason is kept."""
        ...

    def enable(self, endpoint_id: str, *, by: str) -> None:
        """A person re-enables the endpoint; its failure streak starts again at 0."""
        ...


def _check_person(by: object) -> str:
    if not isinstance(by, str) or not by.strip():
        raise InvalidArgument(
            "by", by, "who re-enables the endpoint (a user name): only a person does"
        )
    return check_text(by, field="by", max_length=255)


class DatabaseWebhookLedger:
    """The ledger in this app's tables, on the jobs database (or ``using``).

    Runs on Django's connection for the alias, so in a worker each attempt's row is
    committed when ``record`` returns (autocommit), and in a test it joins the test's
    transaction. ``now`` is the clock (the testing clock in tests; None: the
    database's).
    """

    def __init__(
        self, using: str | None = None, *, now: Callable[[], Any] | None = None
    ) -> None:
        self.using = using
        self.now = now or (lambda: None)

    @property
    def db(self) -> Database:
        return DjangoDatabase(self.using or get_settings().DATABASE)

    def is_disabled(self, endpoint_id: str) -> bool:
        rows = self.db.run(QUERIES["webhook_is_disabled"], endpoint_id=endpoint_id)
        return bool(rows[0]["disabled"])

    def record(self, attempt: DeliveryAttempt) -> int:
        rows = self.db.run(
            QUERIES["webhook_record"],
            endpoint_id=attempt.endpoint_id,
            event_id=attempt.event_id,
            topic=attempt.topic,
            job_id=attempt.job_id,
            attempt=attempt.attempt,
            tenant_id=attempt.tenant_id,
            ok=attempt.ok,
            status=attempt.status,
            error=attempt.error,
            retry_after=attempt.retry_after,
            duration=attempt.duration,
            now=self.now(),
        )
        return int(rows[0]["consecutive_failures"])

    def disable(self, endpoint_id: str, reason: str) -> None:
        self.db.run(
            QUERIES["webhook_disable"],
            endpoint_id=endpoint_id,
            reason=reason,
            now=self.now(),
        )

    def enable(self, endpoint_id: str, *, by: str) -> None:
        self.db.run(
            QUERIES["webhook_enable"],
            endpoint_id=endpoint_id,
            enabled_by=_check_person(by),
            now=self.now(),
        )

    def trim(self, before: datetime) -> int:
        """Delete delivery rows attempted before ``before``; answer how many."""
        from ultimate_jobs.models.webhooks import WebhookDelivery

        manager = WebhookDelivery.objects
        if self.using:
            manager = manager.db_manager(self.using)
        deleted, _ = manager.filter(attempted_at__lt=before).delete()
        return deleted


@dataclass
class _EndpointState:
    consecutive_failures: int = 0
    disabled_reason: str | None = None
    enabled_by: str = ""


@dataclass
class MemoryWebhookLedger:
    """A ledger in this process's memory (tests, development): never for production,
    where a restart would forget every disabled endpoint. Keeps the last ``keep``
    attempts in ``attempts``."""

    keep: int = 1000
    attempts: deque[DeliveryAttempt] = field(init=False)
    endpoints: dict[str, _EndpointState] = field(init=False, default_factory=dict)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        validate.whole(self.keep, field="keep")
        self.attempts = deque(maxlen=self.keep)

    def is_disabled(self, endpoint_id: str) -> bool:
        with self._lock:
            state = self.endpoints.get(endpoint_id)
            return state is not None and state.disabled_reason is not None

    def record(self, attempt: DeliveryAttempt) -> int:
        with self._lock:
            self.attempts.append(attempt)
            state = self.endpoints.setdefault(attempt.endpoint_id, _EndpointState())
            state.consecutive_failures = (
                0 if attempt.ok else state.consecutive_failures + 1
            )
            return state.consecutive_failures

    def disable(self, endpoint_id: str, reason: str) -> None:
        with self._lock:
            state = self.endpoints.setdefault(endpoint_id, _EndpointState())
            if state.disabled_reason is None:
                state.disabled_reason = reason

    def enable(self, endpoint_id: str, *, by: str) -> None:
        by = _check_person(by)
        with self._lock:
            self.endpoints[endpoint_id] = _EndpointState(enabled_by=by)

    def disabled_reason(self, endpoint_id: str) -> str | None:
        """Why the endpoint is disabled, or None while it is not."""
        with self._lock:
            state = self.endpoints.get(endpoint_id)
            return None if state is None else state.disabled_reason
