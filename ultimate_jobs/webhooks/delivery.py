"""Outbound webhooks (F5): ``webhook(...)`` declares a job that delivers ONE event to ONE
endpoint, signed (webhook_signature.py), with every attempt in a ledger.

The endpoint is the unit because retries, disable-after-N and the ledger are facts about
one endpoint: a job that fanned out to every subscriber would retry all of them because
one was down. Which endpoints exist is the app's; the fan-out is the app's own loop, one
enqueue per endpoint::

    deliver = webhook(
        "partners.webhook",
        tenant=lambda p: p["tenant_id"],
        endpoint=lambda p: endpoint_of(p["endpoint_id"]),  # WebhookEndpoint | None
        event=lambda p: event_of(p["event_id"]),  # WebhookEvent | None
        ledger=DatabaseWebhookLedger(),
    )
    for subscriber in Subscription.objects.filter(topic="orders.paid"):
        deliver.enqueue(
            endpoint_id=str(subscriber.pk), event_id=event_id, tenant_id=org_id
        )

One attempt, in order: the tenant the input names must be the run's; the endpoint and the
event are read (every attempt, never in a step: the endpoint carries the secret and a
step's output is stored); the endpoint's own ``disabled`` and the ledger's
``is_disabled`` are asked; a drain that began stops a request not yet sent; the POST
goes out signed at the send time, to an address checked to be public (B6, transport.py:
resolved once, connected to as checked, ``WEBHOOK_ALLOWED_NETWORKS`` for exceptions),
redirects NOT followed (following one would re-POST a body signed for one host to
whatever host the receiver named); the attempt is recorded in the ledger, its error
with the URL's credentials and query values masked; then the outcome: done on 2xx; else ``RetryAfter`` when the receiver named
a time (clamped by the retry's ``max_delay``), or ``WebhookDeliveryFailed`` (backoff);
``disable_after`` consecutive failures disable the endpoint and dead-letter the delivery
(``WebhookEndpointDisabled``), and only a person re-enables it (``ledger.enable``).

HTTP is the standard library's ``http.client``: one POST with a socket timeout to a
pinned address needs no dependency. A refused address is ``WebhookAddressRefused``
(terminal: no request is made).
"""

from __future__ import annotations

import functools
import logging
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import NO_TENANT, Concurrency, NoTenant
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.factory import declare
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.durations import Duration, parse_duration
from ultimate_jobs.ground.exceptions import (
    InvalidJobPayload,
    JobDeclarationInvalid,
    JobTenantMismatch,
    RetryAfter,
    WebhookAddressRefused,
    WebhookDeliveryFailed,
    WebhookEndpointDisabled,
    WebhookInvalid,
    WebhookNotFound,
)
from ultimate_jobs.webhooks.ledger import DeliveryAttempt, WebhookLedger
from ultimate_jobs.webhooks.signature import (
    SIGNATURE_HEADERS,
    check_label,
    signature_headers,
)
from ultimate_jobs.webhooks.transport import allowed_networks, post
from ultimate_jobs.webhooks.transport import (
    retry_after_seconds as retry_after_seconds,  # where callers have always found it
)

logger = logging.getLogger(__name__)

USER_AGENT = "ultimate-jobs-webhook/1"
DEFAULT_RETRY = Retry(attempts=10, backoff="exponential", delay="30s", max_delay="6h")
DEADLINE_MARGIN = 5.0  # seconds the attempt's deadline adds to the request timeout
MAX_ID_LENGTH = 200  # the ledger's endpoint_id and event_id columns
PARAMETERS: dict[str, Any] = {
    "endpoint_id": str,
    "event_id": str,
    "tenant_id": str | None,
}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The headers the framework sets: an endpoint's own headers never override them (an
# endpoint row that could set the signature header is one that can forge it).
_OWN_HEADERS = frozenset(
    name.lower() for name in (*SIGNATURE_HEADERS, "Content-Type", "User-Agent")
)


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    """Where one delivery goes. ``url`` (it may carry a token), ``secret`` and
    ``headers`` never appear in a repr, a step, a log line or the ledger; the ledger
    and the logs name the endpoint by ``id``."""

    id: str
    url: str = field(repr=False)
    secret: str | bytes = field(repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    disabled: bool = False  # the app's own verdict, asked beside the ledger's


@dataclass(frozen=True, slots=True)
class WebhookEvent:
    """What one delivery carries: ``body`` is sent (and signed) byte for byte."""

    id: str
    topic: str
    body: str | bytes
    content_type: str = "application/json"


class Delivery:
    """The body of a webhook job: one attempt of one event to one endpoint."""

    def __init__(
        self,
        name: str,
        *,
        endpoint: Callable[[dict[str, Any]], WebhookEndpoint | None],
        event: Callable[[dict[str, Any]], WebhookEvent | None],
        ledger: WebhookLedger,
        disable_after: int,
        timeout: float,
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.event = event
        self.ledger = ledger
        self.disable_after = disable_after
        self.timeout = timeout

    def __call__(self, run: Run, input: dict[str, Any]) -> None:
        tenant = input.get("tenant_id")
        if tenant is not None and tenant != run.tenant_id:
            raise JobTenantMismatch(self.name, "tenant_id", tenant, run.tenant_id)
        target = self._endpoint(input)
        fact = self._event(input)
        body = fact.body.encode("utf-8") if isinstance(fact.body, str) else fact.body
        if target.disabled or self.ledger.is_disabled(target.id):
            raise WebhookEndpointDisabled(
                self.name,
                target.id,
                "by the app" if target.disabled else "by the ledger",
            )
        # A drain stops a request not yet sent; one on the wire runs to its answer.
        run.cancel_token.raise_if_cancelled()
        headers = self._headers(target, fact, body)
        started = time.monotonic()
        settings = get_settings()
        allowed = allowed_networks(settings.WEBHOOK_ALLOWED_NETWORKS)
        answer = post(
            target.url,
            body,
            headers,
            self.timeout,
            allowed=allowed,
            secret_patterns=settings.WEBHOOK_SECRET_PATTERNS,
        )
        duration = time.monotonic() - started
        failures = self.ledger.record(
            DeliveryAttempt(
                endpoint_id=target.id,
                event_id=fact.id,
                topic=fact.topic,
                ok=answer.ok,
                status=answer.status,
                error=answer.error,
                retry_after=answer.retry_after,
                duration=duration,
                job_id=run.job_id,
                attempt=run.attempt,
                tenant_id=run.tenant_id,
            )
        )
        fields = {
            "job_id": str(run.job_id),
            "job_name": self.name,
            "endpoint_id": target.id,
            "event_id": fact.id,
            "topic": fact.topic,
            "status": answer.status,
            "duration": round(duration, 6),
        }
        if answer.ok:
            logger.info("jobs.webhook.delivered", extra=fields)
            return
        logger.warning(
            "jobs.webhook.failed",
            extra={**fields, "error": answer.error, "consecutive_failures": failures},
        )
        if answer.refused:  # B6: no request was made, and none will be to that address
            raise WebhookAddressRefused(
                "endpoint.url",
                f"<the URL of endpoint {target.id}>",
                answer.error,
                job=self.name,
            )
        if failures >= self.disable_after:
            reason = f"{failures} consecutive failures, the last: {answer.error}"
            self.ledger.disable(target.id, reason[:500])
            logger.error("jobs.webhook.disabled", extra={**fields, "reason": reason})
            raise WebhookEndpointDisabled(self.name, target.id, reason)
        if answer.retry_after is not None:
            raise RetryAfter(
                answer.retry_after,
                f"X_WEBHOOK_DELIVERY_THROTTLED: endpoint_id={target.id!r} answered "
                f"{answer.status} with Retry-After {answer.retry_after:g}s",
            )
        raise WebhookDeliveryFailed(self.name, target.id, answer.status, answer.error)

    def _endpoint(self, input: dict[str, Any]) -> WebhookEndpoint:
        target = self.endpoint(input)
        if target is None:
            raise WebhookNotFound(
                f"{self.name}: endpoint_id={input['endpoint_id']!r}: no such endpoint"
            )
        if not isinstance(target, WebhookEndpoint):
            raise WebhookInvalid(
                "endpoint",
                type(target).__name__,
                "endpoint() answers a WebhookEndpoint or None",
                job=self.name,
            )
        try:
            parts = urllib.parse.urlsplit(target.url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except (TypeError, ValueError, AttributeError):
            valid = False
        if not valid:
            # The URL itself stays out of the message: it may carry a token.
            raise WebhookInvalid(
                "endpoint.url",
                f"<the URL of endpoint {target.id}>",
                "an http:// or https:// URL with a host",
                job=self.name,
            )
        for name, value in target.headers.items():
            if not _HEADER_NAME.fullmatch(str(name)) or re.search(
                r"[\r\n\x00]", str(value)
            ):
                raise WebhookInvalid(
                    "endpoint.headers",
                    name,
                    "header names are tokens; values hold no line breaks",
                    job=self.name,
                )
        return target

    def _event(self, input: dict[str, Any]) -> WebhookEvent:
        fact = self.event(input)
        if fact is None:
            raise WebhookNotFound(
                f"{self.name}: event_id={input['event_id']!r}: no such event"
            )
        if not isinstance(fact, WebhookEvent):
            raise WebhookInvalid(
                "event",
                type(fact).__name__,
                "event() answers a WebhookEvent or None",
                job=self.name,
            )
        check_label("event.id", fact.id)
        check_label("event.topic", fact.topic)
        if not isinstance(fact.body, str | bytes):
            raise WebhookInvalid(
                "event.body", type(fact.body).__name__, "str or bytes", job=self.name
            )
        return fact

    def _headers(
        self, target: WebhookEndpoint, fact: WebhookEvent, body: bytes
    ) -> dict[str, str]:
        # The endpoint's headers merge UNDER the framework's, case-insensitively.
        headers = {
            str(k): str(v)
            for k, v in target.headers.items()
            if str(k).lower() not in _OWN_HEADERS
        }
        headers["Content-Type"] = fact.content_type
        headers["User-Agent"] = USER_AGENT
        headers.update(signature_headers(target.secret, fact.id, fact.topic, body))
        return headers


def delivery_key(endpoint_id: str, event_id: str) -> str:
    """The idempotency key of one delivery: the endpoint id is length-prefixed, so no
    two (endpoint_id, event_id) pairs share a key (``org:1`` + ``7`` and ``org`` +
    ``1:7`` used to be the same job, and one delivery was dropped)."""
    return f"webhook:{len(endpoint_id)}:{endpoint_id}:{event_id}"


def _delivery_key(job: str) -> Callable[[dict[str, Any]], str]:
    """One live delivery per (endpoint_id, event_id); an empty id, or one longer than
    the ledger's column, is refused."""

    def key(p: dict[str, Any]) -> str:
        for field_name in ("endpoint_id", "event_id"):
            value = p.get(field_name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidJobPayload(job, field_name, value, "a non-empty string")
            if len(value) > MAX_ID_LENGTH:
                raise InvalidJobPayload(
                    job, field_name, value, f"at most {MAX_ID_LENGTH} characters"
                )
        return delivery_key(p["endpoint_id"], p["event_id"])

    return key


def webhook(
    name: str,
    *,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant,
    endpoint: Callable[[dict[str, Any]], WebhookEndpoint | None],
    event: Callable[[dict[str, Any]], WebhookEvent | None],
    ledger: WebhookLedger,
    disable_after: int = 10,
    timeout: Duration = "10s",
    retry: Retry | None = None,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    description: str = "",
    concurrency: int | Concurrency | None = None,
    on_settled: Callable[[Any], Any] | None = None,
    retention: Mapping[str, Any] | None = None,
) -> JobHandle:
    """Declare a job delivering one event to one endpoint (F5); answers its handle.

    The input is ``endpoint_id``, ``event_id`` and an optional ``tenant_id`` (which must
    be the run's tenant); ``endpoint`` and ``event`` read the two from it on every
    attempt. One live delivery per (endpoint_id, event_id): that pair is the
    idempotency key. ``timeout`` bounds the request (connect, then each read); the
    attempt's deadline is ``timeout`` + 5 s. ``retry`` defaults to 10 attempts,
    exponential from 30 s, capped at 6 h.
    """
    if tenant is not NO_TENANT and not callable(tenant):
        raise JobDeclarationInvalid(
            "tenant", tenant, "a function of the input, or NO_TENANT", job=name
        )
    for field_name, seam in (("endpoint", endpoint), ("event", event)):
        if not callable(seam):
            raise JobDeclarationInvalid(
                field_name, seam, "a function of the input", job=name
            )
    if not isinstance(ledger, WebhookLedger):
        raise JobDeclarationInvalid(
            "ledger",
            ledger,
            "a WebhookLedger (DatabaseWebhookLedger(), MemoryWebhookLedger())",
            job=name,
        )
    validate.whole(
        disable_after,
        field="disable_after",
        error=functools.partial(JobDeclarationInvalid, job=name),
    )
    seconds = parse_duration(
        timeout, field="timeout", job=name, error=JobDeclarationInvalid
    )
    body = Delivery(
        name,
        endpoint=endpoint,
        event=event,
        ledger=ledger,
        disable_after=disable_after,
        timeout=seconds,
    )
    return declare(
        "webhook",
        name,
        PARAMETERS,
        body,
        defaults={"tenant_id": None},
        idempotency_key=_delivery_key(name),
        tenant=tenant,
        timeout=seconds + DEADLINE_MARGIN,
        retry=retry if retry is not None else DEFAULT_RETRY,
        queue=queue,
        priority=priority,
        description=description or f"Deliver one event to one endpoint ({name}).",
        concurrency=concurrency,
        on_settled=on_settled,
        retention=retention,
    )
