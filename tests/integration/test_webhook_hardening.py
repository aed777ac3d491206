"""Webhook hardening (B6; issue 14, defects 4-6), against a real receiver on 127.0.0.1.

* 4: the dedupe key is unambiguous: endpoint ``org:1`` + event ``7`` and endpoint
  ``org`` + event ``1:7`` are two deliveries (they were one job: a delivery dropped).
* 5: credentials and query values of an endpoint URL never reach the ledger,
  ``last_error`` or the logs (a ``user:token@host`` URL leaked through the error).
* 6: deliveries reach public addresses only: loopback, link-local (the cloud
  metadata address), private, unique-local, multicast, unspecified and IPv4-mapped
  forms are refused before any connection, for IP literals and for a DNS name whose
  answer is private (a resolver stub in this process: ``socket.getaddrinfo``). The
  request goes to the address that was checked: a resolver that answers differently
  the second time (DNS rebinding) is never asked a second time. No traffic leaves
  127.0.0.1.
"""

from __future__ import annotations

import base64
import logging
import socket
import uuid

import pytest

from tests.http_receiver import serving
from ultimate_jobs import (
    NO_TENANT,
    DatabaseWebhookLedger,
    Retry,
    WebhookEndpoint,
    WebhookEvent,
    webhook,
)
from ultimate_jobs.models import Job, WebhookDelivery

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]

TOKEN = "tok3n-never-shown"
PASSWORD = "pa55-never-shown"


class Endpoints:
    def __init__(self) -> None:
        self.urls: dict[str, str] = {}

    def endpoint(self, p):
        url = self.urls.get(p["endpoint_id"])
        return (
            None if url is None else WebhookEndpoint(p["endpoint_id"], url, "whsec_x")
        )

    def event(self, p):
        return WebhookEvent(p["event_id"].replace(":", "-"), "orders.paid", "{}")


@pytest.fixture
def endpoints():
    return Endpoints()


@pytest.fixture
def deliver(endpoints, jobs):
    return webhook(
        f"tests.hardened.{uuid.uuid4().hex[:8]}",
        tenant=NO_TENANT,
        endpoint=endpoints.endpoint,
        event=endpoints.event,
        ledger=DatabaseWebhookLedger(now=jobs.now),
        timeout="2s",
        retry=Retry(attempts=3, delay="1h"),
    )


@pytest.fixture
def receiver():
    with serving() as running:
        yield running


def allow(settings, *networks: str) -> None:
    settings.ULTIMATE_JOBS = {"WEBHOOK_ALLOWED_NETWORKS": list(networks)}


def job_of(answer) -> Job:
    return Job.objects.get(pk=answer.id)


# -- 4: the dedupe key -----------------------------------------------------------------


def test_an_endpoint_and_event_pair_never_shares_a_key_with_another(deliver):
    first = deliver.enqueue(endpoint_id="org:1", event_id="7")
    second = deliver.enqueue(endpoint_id="org", event_id="1:7")
    assert not second.deduped
    assert first.id != second.id
    keys = set(Job.objects.values_list("idempotency_key", flat=True))
    assert keys == {"webhook:5:org:1:7", "webhook:3:org:1:7"}
    assert deliver.enqueue(endpoint_id="org:1", event_id="7").deduped


def test_ids_longer_than_the_ledger_s_columns_are_refused_at_enqueue(deliver):
    from ultimate_jobs import InvalidJobPayload

    with pytest.raises(InvalidJobPayload) as info:
        deliver.enqueue(endpoint_id="e" * 201, event_id="7")
    assert info.value.field == "endpoint_id"
    assert Job.objects.count() == 0


# -- 5: URL secrets ----------------------------------------------------------------------


def test_url_credentials_and_query_values_never_reach_ledger_error_or_logs(
    deliver, endpoints, jobs, caplog, settings
):
    allow(settings, "127.0.0.0/8")
    caplog.set_level(logging.DEBUG)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    endpoints.urls["userinfo"] = (
        f"http://ops:{PASSWORD}@127.0.0.1:{port}/hook?token={TOKEN}&v=2"
    )
    endpoints.urls["bad-port"] = f"http://ops:{PASSWORD}@127.0.0.1:x{TOKEN}/hook"
    endpoints.urls["space"] = f"http://127.0.0.1:{port}/hook?token={TOKEN} x"
    answers = [
        deliver.enqueue(endpoint_id=name, event_id="evt")
        for name in ("userinfo", "bad-port", "space")
    ]
    jobs.run()
    stored = [
        *WebhookDelivery.objects.values_list("error", flat=True),
        *(job_of(a).last_error for a in answers),
    ]
    logged = caplog.text + repr([r.__dict__ for r in caplog.records])
    assert len(stored) == 6 and all(stored)
    for secret in (TOKEN, PASSWORD):
        assert secret not in repr(stored)
        assert secret not in logged
    assert "refused" in WebhookDelivery.objects.get(endpoint_id="userinfo").error


def test_credentials_in_the_url_go_as_basic_authorization(
    deliver, endpoints, jobs, receiver, settings
):
    allow(settings, "127.0.0.0/8")
    host, port = receiver.url("/").split("//")[1].split("/")[0].split(":")
    endpoints.urls["auth"] = f"http://ops:{PASSWORD}@{host}:{port}/hook?token={TOKEN}"
    answer = deliver.enqueue(endpoint_id="auth", event_id="evt")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed", job_of(answer).last_error
    [request] = receiver.requests
    expected = base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert request.path == f"/hook?token={TOKEN}"
    assert request.headers["Host"] == f"{host}:{port}"


# -- 6: SSRF -----------------------------------------------------------------------------

REFUSED = [
    pytest.param("127.0.0.1", "loopback", id="loopback"),
    pytest.param("127.8.9.10", "loopback", id="loopback-8"),
    pytest.param("[::1]", "loopback", id="loopback-v6"),
    pytest.param("169.254.169.254", "link-local", id="metadata"),
    pytest.param("[fe80::1]", "link-local", id="link-local-v6"),
    pytest.param("10.0.0.1", "private", id="private-10"),
    pytest.param("172.16.5.4", "private", id="private-172"),
    pytest.param("192.168.1.1", "private", id="private-192"),
    pytest.param("[fd12:3456::1]", "unique-local", id="unique-local"),
    pytest.param("224.0.0.1", "multicast", id="multicast"),
    pytest.param("[ff02::1]", "multicast", id="multicast-v6"),
    pytest.param("0.0.0.0", "unspecified", id="unspecified"),  # noqa: S104 - the address refused
    pytest.param("[::]", "unspecified", id="unspecified-v6"),
    pytest.param("[::ffff:127.0.0.1]", "loopback", id="mapped-loopback"),
    pytest.param("[::ffff:169.254.169.254]", "link-local", id="mapped-metadata"),
    pytest.param("[::ffff:10.1.1.1]", "private", id="mapped-private"),
]


@pytest.fixture
def no_connection(monkeypatch):
    """Fail the test if anything tries to open a connection."""
    tried: list[object] = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise AssertionError(f"a connection was attempted: {args!r}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


@pytest.mark.parametrize(("host", "kind"), REFUSED)
def test_a_non_public_address_is_refused_before_any_connection(
    deliver, endpoints, jobs, no_connection, host, kind
):
    endpoints.urls["ep"] = f"http://{host}:8080/hook?token={TOKEN}"
    answer = deliver.enqueue(endpoint_id="ep", event_id="evt")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"  # terminal: no retry will be safer
    row = job_of(answer)
    assert row.error_code == "X_WEBHOOK_ADDRESS_REFUSED"
    assert f"a {kind} address" in row.last_error
    assert "WEBHOOK_ALLOWED_NETWORKS" in row.last_error
    [recorded] = WebhookDelivery.objects.values_list("ok", "status", "error")
    assert recorded[:2] == (False, None)
    assert kind in recorded[2]
    assert TOKEN not in row.last_error + recorded[2]
    assert no_connection == []


def test_the_loopback_receiver_gets_nothing_unless_its_network_is_allowed(
    deliver, endpoints, jobs, receiver, settings
):
    endpoints.urls["local"] = receiver.url("/hook")
    refused = deliver.enqueue(endpoint_id="local", event_id="one")
    assert [a.outcome for a in jobs.run()] == ["dead-lettered"]
    assert job_of(refused).error_code == "X_WEBHOOK_ADDRESS_REFUSED"
    assert receiver.requests == []
    allow(settings, "127.0.0.1/32")
    allowed = deliver.enqueue(endpoint_id="local", event_id="two")
    assert [a.outcome for a in jobs.run()] == ["completed"]
    assert job_of(allowed).state == "done"
    assert len(receiver.requests) == 1


class Resolver:
    """A local resolver stub: names map to the answers a test chooses; IP literals
    resolve as they always do. Counts the lookups of each name."""

    def __init__(self, monkeypatch, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: dict[str, int] = {}
        self.real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)

    def getaddrinfo(self, host, port, *args, **kwargs):
        if host not in self.answers:
            return self.real(host, port, *args, **kwargs)
        turn = self.asked.get(host, 0)
        self.asked[host] = turn + 1
        batch = self.answers[host][min(turn, len(self.answers[host]) - 1)]
        return [
            (
                socket.AF_INET6 if ":" in ip else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (ip, port, 0, 0) if ":" in ip else (ip, port),
            )
            for ip in batch
        ]


def test_a_dns_name_resolving_to_a_private_address_is_refused(
    deliver, endpoints, jobs, monkeypatch, no_connection
):
    resolver = Resolver(
        monkeypatch,
        {
            "partner.example": [["10.20.30.40"]],
            "mixed.example": [["93.184.216.34", "192.168.0.7"]],
            "metadata.example": [["169.254.169.254"]],
        },
    )
    for name in resolver.answers:
        endpoints.urls[name] = f"https://{name}/hook"
    answers = {
        name: deliver.enqueue(endpoint_id=name, event_id="e")
        for name in resolver.answers
    }
    assert [a.outcome for a in jobs.run()] == ["dead-lettered"] * 3
    for name, answer in answers.items():
        row = job_of(answer)
        assert row.error_code == "X_WEBHOOK_ADDRESS_REFUSED", name
        assert f"{name} resolves to" in row.last_error
    assert (
        "192.168.0.7, a private address" in job_of(answers["mixed.example"]).last_error
    )
    assert no_connection == []


def test_the_request_goes_to_the_checked_address_whatever_dns_answers_next(
    deliver, endpoints, jobs, receiver, monkeypatch, settings
):
    """DNS rebinding: the first answer is the allowed receiver, every later answer a
    private address. The name is resolved once; the socket goes to the checked
    address; the Host header still names the name."""
    allow(settings, "127.0.0.1/32")
    resolver = Resolver(monkeypatch, {"rebind.example": [["127.0.0.1"], ["10.9.8.7"]]})
    port = receiver.url("/").split(":")[2].split("/")[0]
    endpoints.urls["rebind"] = f"http://rebind.example:{port}/hook"
    answer = deliver.enqueue(endpoint_id="rebind", event_id="evt")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed", job_of(answer).last_error
    assert resolver.asked == {"rebind.example": 1}
    [request] = receiver.requests
    assert request.headers["Host"] == f"rebind.example:{port}"
