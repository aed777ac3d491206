"""The webhook signature format, for the sender (webhooks.py) and for receivers (F5).

One module holds the header names, the signed string and the MAC, so the signing half
and the checking half cannot drift apart. A delivery carries::

    X-Ultimate-Webhook-Id:        evt_01HZ
    X-Ultimate-Webhook-Topic:     orders.paid
    X-Ultimate-Webhook-Signature: t=1700000000,v1=<hex hmac-sha256>

and the MAC is HMAC-SHA256 with the endpoint's secret over
``v1:<t>:<id>:<topic>:<body>`` (the body's exact bytes). Why each piece:

- the timestamp is inside the MAC, so a captured delivery re-dated to slip back into a
  receiver's freshness window no longer verifies;
- the timestamp is the SEND time, not the event's: a retry three days later is signed
  again, so the window measures the request, not the age of the fact;
- ``:`` is refused in an id and a topic: otherwise one MAC over ``v1:t:a:b:c:<body>``
  would authenticate two id/topic splits (``a:b`` / ``c`` and ``a`` / ``b:c``);
- the comparison is constant-time (``hmac.compare_digest``).

A Django receiver::

    from ultimate_jobs.webhook_signature import verify_webhook_signature

    def receive(request):
        try:
            delivery = verify_webhook_signature(request, secret=SECRET, tolerance=300)
        except WebhookSignatureInvalid:
            return HttpResponse(status=400)
        ...  # delivery.id, delivery.topic, delivery.body; dedupe on delivery.id
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import WebhookInvalid, WebhookSignatureInvalid

if TYPE_CHECKING:
    from django.http import HttpRequest

ID_HEADER = "X-Ultimate-Webhook-Id"
TOPIC_HEADER = "X-Ultimate-Webhook-Topic"
SIGNATURE_HEADER = "X-Ultimate-Webhook-Signature"
SIGNATURE_HEADERS = (ID_HEADER, TOPIC_HEADER, SIGNATURE_HEADER)
SCHEME = "v1"
DEFAULT_TOLERANCE = 300.0  # seconds between the signed send time and the check
MAX_LABEL_LENGTH = 200
# Visible ASCII without ':' — what a header carries unchanged through every proxy.
_LABEL = re.compile(r"[\x21-\x39\x3b-\x7e]+")

Secret = str | bytes


@dataclass(frozen=True, slots=True)
class VerifiedWebhook:
    """A delivery whose signature verified: dedupe on ``id`` (deliveries repeat)."""

    id: str
    topic: str
    timestamp: int
    body: bytes


def check_label(field: str, value: object) -> str:
    """An event id or topic: 1-200 visible ASCII characters, never ':'."""
    if (
        not isinstance(value, str)
        or len(value) > MAX_LABEL_LENGTH
        or not _LABEL.fullmatch(value)
    ):
        reason = (
            "':' is refused: it would let one signature authenticate two id/topic "
            "splits"
            if isinstance(value, str) and ":" in value
            else f"1-{MAX_LABEL_LENGTH} visible ASCII characters (no spaces, no ':')"
        )
        raise WebhookInvalid(field, value, reason)
    return value


def _key(secret: Secret) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, bytes) or not secret:
        raise WebhookInvalid("secret", "<hidden>", "a non-empty str or bytes")
    return secret


def signed_content(timestamp: int, event_id: str, topic: str, body: bytes) -> bytes:
    """The bytes the MAC covers: ``v1:<t>:<id>:<topic>:<body>``."""
    check_label("id", event_id)
    check_label("topic", topic)
    head = f"{SCHEME}:{int(timestamp)}:{event_id}:{topic}:".encode("ascii")
    return head + body


def compute_signature(
    secret: Secret, timestamp: int, event_id: str, topic: str, body: bytes
) -> str:
    """The hex HMAC-SHA256 of ``signed_content`` under ``secret``."""
    content = signed_content(timestamp, event_id, topic, body)
    return hmac.new(_key(secret), content, hashlib.sha256).hexdigest()


def signature_headers(
    secret: Secret,
    event_id: str,
    topic: str,
    body: bytes,
    *,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The three headers of a delivery signed at ``timestamp`` (default: now)."""
    sent = int(time.time()) if timestamp is None else int(timestamp)
    mac = compute_signature(secret, sent, event_id, topic, body)
    return {
        ID_HEADER: event_id,
        TOPIC_HEADER: topic,
        SIGNATURE_HEADER: f"t={sent},{SCHEME}={mac}",
    }


def _parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    macs: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit() and timestamp is None:
            timestamp = int(value)
        elif key == SCHEME and value:
            macs.append(value)
    if timestamp is None or not macs:
        raise WebhookSignatureInvalid(
            f"{SIGNATURE_HEADER} is malformed: expected t=<unix seconds>,{SCHEME}=<hex>"
        )
    return timestamp, macs


def _secrets(secret: Secret | Iterable[Secret]) -> list[bytes]:
    if isinstance(secret, str | bytes):
        return [_key(secret)]
    keys = [_key(s) for s in secret]
    if not keys:
        raise WebhookInvalid("secret", "<hidden>", "at least one secret")
    return keys


def verify_signature(
    headers: Mapping[str, str],
    body: bytes,
    secret: Secret | Iterable[Secret],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> VerifiedWebhook:
    """Check a delivery's headers against its body; raise WebhookSignatureInvalid.

    ``secret`` may be several secrets (a rotation): any one of them verifying is
    enough. A timestamp further than ``tolerance`` seconds from ``now`` (either way)
    is refused, so a captured delivery cannot be replayed later.
    """
    validate.positive(
        tolerance,
        field="tolerance",
        error=WebhookInvalid,
        reason="a positive number of seconds",
    )
    keys = _secrets(secret)
    lowered = {k.lower(): v for k, v in headers.items()}
    found = [lowered.get(name.lower()) for name in SIGNATURE_HEADERS]
    event_id, topic, header = found
    if event_id is None or topic is None or header is None:
        missing = [
            n for n, v in zip(SIGNATURE_HEADERS, found, strict=True) if v is None
        ]
        raise WebhookSignatureInvalid(f"missing header(s): {', '.join(missing)}")
    try:
        check_label("id", event_id)
        check_label("topic", topic)
    except WebhookInvalid as exc:
        raise WebhookSignatureInvalid(f"{exc.field} header: {exc.reason}") from None
    timestamp, macs = _parse(header)
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        raise WebhookSignatureInvalid(
            f"timestamp t={timestamp} is {clock - timestamp:+.0f}s from now, outside "
            f"the tolerance of {tolerance:g}s"
        )
    content = signed_content(timestamp, event_id, topic, body)
    matched = False
    for key in keys:
        expected = hmac.new(key, content, hashlib.sha256).hexdigest()
        for mac in macs:
            # Constant-time, and every pair is compared: no early exit to time.
            matched |= hmac.compare_digest(expected.encode(), mac.encode())
    if not matched:
        raise WebhookSignatureInvalid("signature does not match the body and headers")
    return VerifiedWebhook(event_id, topic, timestamp, body)


def verify_webhook_signature(
    request: HttpRequest,
    secret: Secret | Iterable[Secret],
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> VerifiedWebhook:
    """Check a Django request a webhook() delivered; raise WebhookSignatureInvalid.

    Reads ``request.headers`` and the raw ``request.body`` (read it before touching
    ``request.POST``); see ``verify_signature``.
    """
    headers = {
        name: value
        for name in SIGNATURE_HEADERS
        if (value := request.headers.get(name)) is not None
    }
    return verify_signature(headers, request.body, secret, tolerance=tolerance, now=now)
