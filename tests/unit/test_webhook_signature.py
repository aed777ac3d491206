"""The webhook signature format and its checks, without a database (F5, B2)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from django.test import RequestFactory

from ultimate_jobs import (
    VerifiedWebhook,
    WebhookInvalid,
    WebhookSignatureInvalid,
    verify_signature,
    verify_webhook_signature,
)
from ultimate_jobs.webhooks import signature as ws
from ultimate_jobs.webhooks.delivery import retry_after_seconds

SECRET = "whsec_unit"
BODY = b'{"order": 42}'
T = 1_700_000_000


def signed(**changes):
    headers = ws.signature_headers(SECRET, "evt_01", "orders.paid", BODY, timestamp=T)
    headers.update(changes)
    return headers


def test_the_header_carries_t_and_the_hex_mac_over_the_canonical_string():
    headers = signed()
    mac = hmac.new(
        SECRET.encode(), b"v1:1700000000:evt_01:orders.paid:" + BODY, hashlib.sha256
    ).hexdigest()
    assert headers == {
        "X-Ultimate-Webhook-Id": "evt_01",
        "X-Ultimate-Webhook-Topic": "orders.paid",
        "X-Ultimate-Webhook-Signature": f"t=1700000000,v1={mac}",
    }


def test_a_signed_delivery_verifies_within_the_tolerance_either_way():
    for now in (T, T + 300, T - 300):
        verified = verify_signature(signed(), BODY, SECRET, tolerance=300, now=now)
        assert verified == VerifiedWebhook("evt_01", "orders.paid", T, BODY)


def test_header_names_are_matched_case_insensitively():
    lowered = {k.lower(): v for k, v in signed().items()}
    assert verify_signature(lowered, BODY, SECRET, now=T).id == "evt_01"


@pytest.mark.parametrize(
    ("headers", "body", "secret", "now", "reason"),
    [
        ({}, BODY + b" ", SECRET, T, "does not match"),
        ({"X-Ultimate-Webhook-Topic": "orders.refunded"}, BODY, SECRET, T, "match"),
        ({"X-Ultimate-Webhook-Id": "evt_02"}, BODY, SECRET, T, "does not match"),
        ({}, BODY, "whsec_other", T, "does not match"),
        ({}, BODY, SECRET, T + 301, "outside the tolerance"),
        ({}, BODY, SECRET, T - 301, "outside the tolerance"),
        ({"X-Ultimate-Webhook-Id": "evt:01"}, BODY, SECRET, T, "':' is refused"),
        ({"X-Ultimate-Webhook-Signature": "v1=abc"}, BODY, SECRET, T, "malformed"),
        (
            {"X-Ultimate-Webhook-Signature": "t=1700000000"},
            BODY,
            SECRET,
            T,
            "malformed",
        ),
    ],
    ids=[
        "body",
        "topic",
        "id",
        "secret",
        "late",
        "early",
        "colon-id",
        "no-t",
        "no-mac",
    ],
)
def test_tampering_skew_and_malformed_headers_are_refused(
    headers, body, secret, now, reason
):
    with pytest.raises(WebhookSignatureInvalid, match=reason) as caught:
        verify_signature(signed(**headers), body, secret, tolerance=300, now=now)
    assert caught.value.code == "X_WEBHOOK_SIGNATURE_INVALID"


def test_a_re_dated_delivery_does_not_verify():
    """The timestamp is inside the mac: moving t into the window breaks it."""
    header = signed()["X-Ultimate-Webhook-Signature"]
    moved = header.replace("t=1700000000", "t=1700000900")
    with pytest.raises(WebhookSignatureInvalid, match="does not match"):
        verify_signature(
            signed(**{"X-Ultimate-Webhook-Signature": moved}),
            BODY,
            SECRET,
            now=T + 900,
        )


def test_a_missing_header_is_named():
    headers = signed()
    del headers["X-Ultimate-Webhook-Topic"]
    with pytest.raises(WebhookSignatureInvalid, match="X-Ultimate-Webhook-Topic"):
        verify_signature(headers, BODY, SECRET, now=T)


def test_any_secret_of_a_rotation_verifies():
    assert verify_signature(signed(), BODY, ["whsec_new", SECRET], now=T).id == "evt_01"
    with pytest.raises(WebhookSignatureInvalid):
        verify_signature(signed(), BODY, ["whsec_new", "whsec_older"], now=T)


def test_the_comparison_is_constant_time(monkeypatch):
    """B2: every candidate mac goes through hmac.compare_digest."""
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    with pytest.raises(WebhookSignatureInvalid):
        verify_signature(signed(), BODY, ["whsec_a", "whsec_b"], now=T)
    assert len(calls) == 2
    verify_signature(signed(), BODY, SECRET, now=T)
    assert len(calls) == 3


def test_a_django_request_verifies_from_its_raw_body():
    request = RequestFactory().post(
        "/hooks/partner", data=BODY, content_type="application/json", headers=signed()
    )
    verified = verify_webhook_signature(request, SECRET, tolerance=60, now=T + 59)
    assert (verified.topic, verified.body) == ("orders.paid", BODY)
    with pytest.raises(WebhookSignatureInvalid, match="tolerance"):
        verify_webhook_signature(request, SECRET, tolerance=60, now=T + 61)


@pytest.mark.parametrize(
    ("event_id", "topic"),
    [("evt:01", "orders.paid"), ("evt_01", "orders:paid"), ("", "t"), ("a b", "t")],
)
def test_a_colon_or_an_unsafe_label_is_refused_when_signing(event_id, topic):
    """F5: one mac over v1:t:a:b:c:<body> would authenticate two id/topic splits."""
    with pytest.raises(WebhookInvalid) as caught:
        ws.signature_headers(SECRET, event_id, topic, BODY, timestamp=T)
    assert caught.value.code == "X_WEBHOOK_INVALID"


def test_bad_tolerances_and_secrets_are_refused():
    with pytest.raises(WebhookInvalid, match="tolerance"):
        verify_signature(signed(), BODY, SECRET, tolerance=0)
    with pytest.raises(WebhookInvalid, match="secret"):
        verify_signature(signed(), BODY, "", now=T)


@pytest.mark.parametrize(
    ("value", "date", "seconds"),
    [
        ("120", None, 120.0),
        (" 5 ", None, 5.0),
        ("0", None, None),
        ("-5", None, None),
        ("soon", None, None),
        (None, None, None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:27:00 GMT", 60.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:29:00 GMT", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None, None),  # long past on this clock
    ],
)
def test_retry_after_reads_delta_seconds_or_a_date_against_the_answer(
    value, date, seconds
):
    assert retry_after_seconds(value, date=date) == seconds


def test_a_stated_delay_is_never_shortened_by_jitter():
    """R2: a RetryAfter waits at least the named time (clamped by max_delay)."""
    import random

    from ultimate_jobs import Retry

    rng = random.Random(7)
    jittered = Retry(max_delay="60s")
    waits = [jittered.stated(30, rng) for _ in range(200)]
    assert min(waits) >= 30
    assert max(waits) <= 33
    assert all(60 <= jittered.stated(3600, rng) <= 66 for _ in range(50))
    assert Retry(jitter=False, max_delay="60s").stated(3600) == 60
