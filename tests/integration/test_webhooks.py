"""Webhook deliveries (F5, B2) on real PostgreSQL, against a real HTTP receiver on
127.0.0.1: signatures that verify, redirects not followed, Retry-After, disable after N
consecutive failures (and no request once disabled), ledger rows written before the
outcome, the secret kept out of steps, rows and logs."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import socket
import time
import types
import uuid

import pytest
from django.test import RequestFactory

from tests.http_receiver import Answer, serving
from ultimate_jobs import (
    NO_TENANT,
    DatabaseWebhookLedger,
    InvalidArgument,
    InvalidJobPayload,
    JobAborted,
    JobDeclarationInvalid,
    MemoryWebhookLedger,
    Retry,
    Run,
    WebhookEndpoint,
    WebhookEvent,
    api,
    current_tenant,
    verify_webhook_signature,
    webhook,
)
from ultimate_jobs.declaration.run import DRAINING
from ultimate_jobs.models import Job, JobStep, WebhookDelivery
from ultimate_jobs.webhooks import signature as webhook_signature

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]


@pytest.fixture(autouse=True)
def local_receiver_allowed(settings):
    """The receiver listens on 127.0.0.1, which B6 refuses unless allowed by name."""
    settings.ULTIMATE_JOBS = {"WEBHOOK_ALLOWED_NETWORKS": ["127.0.0.0/8"]}


SECRET = "whsec_" + "s3cr3t-never-logged-" * 2
BODY = '{"order": 42, "total": "-10.00"}'
SIGNATURE = re.compile(r"t=(\d+),v1=([0-9a-f]{64})")


class World:
    """The app's side: its endpoints and events, read by the seams on every attempt."""

    def __init__(self, receiver) -> None:
        self.receiver = receiver
        self.endpoints: dict[str, WebhookEndpoint] = {}
        self.events: dict[str, WebhookEvent] = {}
        self.seen_tenants: list[str | None] = []

    def endpoint(self, endpoint_id: str, path: str = "/hook", **fields) -> None:
        self.endpoints[endpoint_id] = WebhookEndpoint(
            id=endpoint_id,
            url=fields.pop("url", None) or self.receiver.url(path),
            secret=SECRET,
            **fields,
        )

    def event(self, event_id: str, topic: str = "orders.paid", body: str = BODY):
        self.events[event_id] = WebhookEvent(id=event_id, topic=topic, body=body)

    def read_endpoint(self, p):
        self.seen_tenants.append(current_tenant())
        return self.endpoints.get(p["endpoint_id"])

    def read_event(self, p):
        return self.events.get(p["event_id"])


def declare(world, ledger, **options):
    options.setdefault("retry", Retry(attempts=10, delay="1s", jitter=False))
    options.setdefault("tenant", NO_TENANT)
    return webhook(
        f"tests.webhook.{uuid.uuid4().hex[:8]}",
        endpoint=world.read_endpoint,
        event=world.read_event,
        ledger=ledger,
        **options,
    )


@pytest.fixture
def world():
    with serving() as receiver:
        world = World(receiver)
        world.endpoint("ep1")
        world.event("evt_01")
        yield world


@pytest.fixture
def ledger(jobs):
    return DatabaseWebhookLedger(now=jobs.now)


def job_of(answer) -> Job:
    return Job.objects.get(pk=answer.id)


def deliveries(endpoint_id="ep1"):
    return list(
        WebhookDelivery.objects.filter(endpoint_id=endpoint_id)
        .order_by("id")
        .values_list("event_id", "ok", "status")
    )


def test_a_delivery_is_signed_at_send_time_and_verifies(jobs, world, ledger):
    """F5: id, topic and signature headers; the mac is hmac-sha256 over
    v1:<t>:<id>:<topic>:<body> with t the send time; a Django receiver verifies it."""
    deliver = declare(world, ledger)
    answer = deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    before = int(time.time())
    [attempt] = jobs.run()
    after = int(time.time())
    assert attempt.outcome == "completed"
    [request] = world.receiver.requests
    assert (request.method, request.path, request.body) == (
        "POST",
        "/hook",
        BODY.encode(),
    )
    headers = request.headers
    assert headers["X-Ultimate-Webhook-Id"] == "evt_01"
    assert headers["X-Ultimate-Webhook-Topic"] == "orders.paid"
    assert headers["Content-Type"] == "application/json"
    signature = SIGNATURE.fullmatch(headers["X-Ultimate-Webhook-Signature"])
    assert signature is not None
    stamp, mac = signature.groups()
    assert before <= int(stamp) <= after
    expected = hmac.new(
        SECRET.encode(),
        f"v1:{stamp}:evt_01:orders.paid:".encode() + BODY.encode(),
        hashlib.sha256,
    ).hexdigest()
    assert mac == expected

    django_request = RequestFactory().post(
        "/receive",
        data=request.body,
        content_type="application/json",
        headers={k: v for k, v in headers.items() if k.startswith("X-Ultimate")},
    )
    verified = verify_webhook_signature(django_request, SECRET, tolerance=60)
    assert (verified.id, verified.topic, verified.timestamp, verified.body) == (
        "evt_01",
        "orders.paid",
        int(stamp),
        BODY.encode(),
    )
    assert job_of(answer).state == "done"
    assert deliveries() == [("evt_01", True, 200)]


def test_a_retry_is_signed_again_at_its_own_send_time(jobs, world, ledger, monkeypatch):
    """F5: the timestamp is the SEND time, not the event's: a retry an hour later is
    signed again with a new t (the signing clock is faked: it reads whole seconds)."""
    clock = [1_700_000_000.0]
    monkeypatch.setattr(
        webhook_signature, "time", types.SimpleNamespace(time=lambda: clock[0])
    )
    world.receiver.answer(Answer(500))
    deliver = declare(world, ledger)
    deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    [first] = jobs.run()
    assert first.outcome == "retried"
    clock[0] += 3600
    jobs.travel(seconds=2)
    [second] = jobs.run()
    assert second.outcome == "completed"
    stamps = [
        re.sub(r",v1=.*", "", r.headers["X-Ultimate-Webhook-Signature"])
        for r in world.receiver.requests
    ]
    assert stamps == ["t=1700000000", "t=1700003600"]


def test_a_colon_in_the_event_id_or_topic_is_refused_before_any_request(
    jobs, world, ledger
):
    """F5: ':' in an id or a topic would let one mac authenticate two splits."""
    world.event("evt:02")
    world.event("evt_03", topic="orders:paid")
    deliver = declare(world, ledger)
    first = deliver.enqueue(endpoint_id="ep1", event_id="evt:02")
    second = deliver.enqueue(endpoint_id="ep1", event_id="evt_03")
    outcomes = [a.outcome for a in jobs.run()]
    assert outcomes == ["dead-lettered", "dead-lettered"]
    for answer, field in ((first, "event.id"), (second, "event.topic")):
        row = job_of(answer)
        assert (row.state, row.error_code, row.attempt) == (
            "dead",
            "X_WEBHOOK_INVALID",
            1,
        )
        assert f"{field}=" in row.last_error
    assert world.receiver.requests == []
    assert deliveries() == []


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed_and_fails_the_attempt(jobs, world, ledger, status):
    """F5: following a 3xx would re-POST a body signed for one host to another."""
    world.receiver.answer(Answer(status, {"Location": world.receiver.url("/else")}))
    deliver = declare(world, ledger)
    answer = deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    assert [r.path for r in world.receiver.requests] == ["/hook"]
    row = job_of(answer)
    assert (row.state, row.error_code) == ("delayed", "X_WEBHOOK_DELIVERY_FAILED")
    assert f"answered {status}" in row.last_error
    assert deliveries() == [("evt_01", False, status)]


def test_retry_after_is_honoured_then_the_delivery_lands(jobs, world, ledger):
    """F5, R2: the receiver's Retry-After replaces the backoff (1 s here)."""
    world.receiver.answer(Answer(429, {"Retry-After": "30"}))
    deliver = declare(world, ledger)
    answer = deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    [attempt] = jobs.run()
    assert attempt.outcome == "retried"
    wait = (job_of(answer).run_at - jobs.now()).total_seconds()
    assert 29 < wait <= 30  # jitter off: exactly the named time
    [row] = WebhookDelivery.objects.filter(endpoint_id="ep1")
    assert (row.ok, row.status, row.retry_after) == (False, 429, 30.0)
    assert "X_WEBHOOK_DELIVERY_THROTTLED" in job_of(answer).last_error
    jobs.travel(seconds=28)
    assert jobs.run() == []
    jobs.travel(seconds=2.5)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert len(world.receiver.requests) == 2


def test_retry_after_is_clamped_by_max_delay_and_jitter_never_comes_early(
    jobs, world, ledger
):
    """R2: clamped by the retry's max_delay; with jitter on, never before the named
    time (jitter adds up to a tenth on top)."""
    world.receiver.answer(
        Answer(503, {"Retry-After": "3600"}), Answer(429, {"Retry-After": "20"})
    )
    clamped = declare(
        world, ledger, retry=Retry(attempts=3, max_delay="60s", jitter=False)
    )
    jittered = declare(world, ledger, retry=Retry(attempts=3, jitter=True))
    first = clamped.enqueue(endpoint_id="ep1", event_id="evt_01")
    second = jittered.enqueue(endpoint_id="ep1", event_id="evt_01")
    jobs.run()
    wait = (job_of(first).run_at - jobs.now()).total_seconds()
    assert 59 < wait <= 60
    wait = (job_of(second).run_at - jobs.now()).total_seconds()
    assert 19.5 < wait <= 22


def test_consecutive_failures_disable_the_endpoint_and_only_a_person_enables_it(
    jobs, world, ledger
):
    """F5: disable_after consecutive failures disable the endpoint; the delivery that
    disabled it is dead-lettered; once disabled, no request is made (the ledger is
    asked before every one); a person re-enables it and requeues the dead ones."""
    world.receiver.default = Answer(500)
    deliver = declare(world, ledger, disable_after=3)
    first = deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    outcomes = []
    for _ in range(5):
        outcomes += [a.outcome for a in jobs.run()]
        jobs.travel(seconds=10)
    assert outcomes == ["retried", "retried", "dead-lettered"]
    assert len(world.receiver.requests) == 3
    row = job_of(first)
    assert (row.state, row.error_code, row.attempt) == (
        "dead",
        "X_WEBHOOK_ENDPOINT_DISABLED",
        3,
    )
    assert ledger.is_disabled("ep1")
    assert deliveries() == [("evt_01", False, 500)] * 3

    world.event("evt_02")
    second = deliver.enqueue(endpoint_id="ep1", event_id="evt_02")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert job_of(second).error_code == "X_WEBHOOK_ENDPOINT_DISABLED"
    assert "disabled (by the ledger)" in job_of(second).last_error
    assert len(world.receiver.requests) == 3  # not one more request
    assert len(deliveries()) == 3

    world.receiver.default = Answer(204)
    jobs.travel(days=1)
    assert jobs.run() == []  # nothing re-enables it on its own
    ledger.enable("ep1", by="ops@example.com")
    api.retry(first.id)
    api.retry(second.id)
    assert sorted(a.outcome for a in jobs.run()) == ["completed", "completed"]
    assert len(world.receiver.requests) == 5
    assert not ledger.is_disabled("ep1")


@pytest.mark.parametrize("kind", ["database", "memory"])
def test_a_success_resets_the_streak_but_never_re_enables(jobs, world, kind):
    """F5: the count is of CONSECUTIVE failures, across deliveries to one endpoint."""
    ledger = (
        DatabaseWebhookLedger(now=jobs.now)
        if kind == "database"
        else (MemoryWebhookLedger())
    )
    world.event("evt_02")
    world.event("evt_03")
    world.receiver.answer(Answer(500), Answer(500), Answer(200), Answer(500))
    world.receiver.default = Answer(500)
    deliver = declare(world, ledger, disable_after=3, retry=Retry(attempts=1))
    outcomes = []
    for event_id in ("evt_01", "evt_02", "evt_03", "evt_04", "evt_05"):
        world.event(event_id)
        deliver.enqueue(endpoint_id="ep1", event_id=event_id)
        outcomes += [a.outcome for a in jobs.run()]
    # fail, fail, ok (streak reset), fail, fail: still enabled at 2
    assert outcomes == ["dead-lettered"] * 2 + ["completed"] + ["dead-lettered"] * 2
    assert not ledger.is_disabled("ep1")
    world.event("evt_06")
    deliver.enqueue(endpoint_id="ep1", event_id="evt_06")
    jobs.run()
    assert ledger.is_disabled("ep1")
    assert ledger.record(_attempt(ok=True)) == 0  # a late success: streak reset...
    assert ledger.is_disabled("ep1")  # ...and still disabled
    with pytest.raises(InvalidArgument, match="only a person"):
        ledger.enable("ep1", by=" ")


def _attempt(ok):
    from ultimate_jobs import DeliveryAttempt

    return DeliveryAttempt("ep1", "evt_x", "orders.paid", ok=ok, status=200)


class SpyLedger:
    """A ledger that logs its calls, and the job's state when an attempt is recorded."""

    def __init__(self, inner, log):
        self.inner = inner
        self.log = log
        self.states = []

    def is_disabled(self, endpoint_id):
        self.log.append("is_disabled")
        return self.inner.is_disabled(endpoint_id)

    def record(self, attempt):
        self.log.append("record")
        self.states.append(
            Job.objects.values_list("state", "attempt").get(pk=attempt.job_id)
        )
        return self.inner.record(attempt)

    def disable(self, endpoint_id, reason):
        self.log.append("disable")
        self.inner.disable(endpoint_id, reason)

    def enable(self, endpoint_id, *, by):
        self.inner.enable(endpoint_id, by=by)


def test_the_ledger_is_asked_before_every_request_and_told_before_the_outcome(
    jobs, world, ledger
):
    """F5: is_disabled before every socket; every attempt recorded while the job is
    still running (before its outcome is written), the disabling one included."""
    log: list[str] = []
    world.receiver.on_request = log
    world.receiver.answer(Answer(500), Answer(429, {"Retry-After": "5"}))
    world.receiver.default = Answer(502)
    spy = SpyLedger(ledger, log)
    deliver = declare(world, spy, disable_after=4)
    answer = deliver.enqueue(endpoint_id="ep1", event_id="evt_01")
    outcomes = []
    for _ in range(6):
        outcomes += [a.outcome for a in jobs.run()]
        jobs.travel(seconds=30)
    assert outcomes == ["retried", "retried", "retried", "dead-lettered"]
    assert log == ["is_disabled", "request", "record"] * 4 + ["disable"]
    assert spy.states == [
        ("running", 1),
        ("running", 2),
        ("running", 3),
        ("running", 4),
    ]
    assert job_of(answer).state == "dead"
    assert [s for _, _, s in deliveries()] == [500, 429, 502, 502]


def test_an_endpoint_the_app_disabled_gets_no_request(jobs, world, ledger):
    """F5: the endpoint row's own verdict is asked beside the ledger's."""
    world.endpoint("ep2", disabled=True)
    deliver = declare(world, ledger)
    answer = deliver.enqueue(endpoint_id="ep2", event_id="evt_01")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert job_of(answer).error_code == "X_WEBHOOK_ENDPOINT_DISABLED"
    assert "disabled (by the app)" in job_of(answer).last_error
    assert world.receiver.requests == []


def test_the_secret_never_reaches_steps_rows_or_logs(jobs, world, ledger, caplog):
    """F5, B2: the endpoint is read per attempt and never checkpointed; no log line,
    stored error, ledger row or repr carries the secret."""
    caplog.set_level(logging.DEBUG)
    world.endpoint("ep2", url=world.receiver.url(f"/hook?token={SECRET}"))
    world.receiver.answer(
        Answer(500), Answer(302, {"Location": "/x"}), Answer(429, {"Retry-After": "1"})
    )
    deliver = declare(world, ledger, retry=Retry(attempts=4, delay="1s", jitter=False))
    answers = [
        deliver.enqueue(endpoint_id="ep1", event_id="evt_01"),
        deliver.enqueue(endpoint_id="ep2", event_id="evt_01"),
    ]
    for _ in range(4):
        jobs.run()
        jobs.travel(seconds=5)
    assert [job_of(a).state for a in answers] == ["done", "done"]
    assert len(world.receiver.requests) == 5
    ids = [a.id for a in answers]
    stored = [
        *JobStep.objects.filter(job_id__in=ids).values_list("output", flat=True),
        *Job.objects.filter(pk__in=ids).values_list("input", "last_error"),
        *WebhookDelivery.objects.values_list("error", "endpoint_id", "event_id"),
    ]
    assert JobStep.objects.filter(job_id__in=ids).count() == 0
    assert "s3cr3t" not in repr(stored)
    logged = caplog.text + repr([r.__dict__ for r in caplog.records])
    assert "jobs.webhook.failed" in logged
    assert "s3cr3t" not in logged
    assert "s3cr3t" not in repr(world.endpoints["ep2"])


def test_an_unreachable_endpoint_and_a_slow_one_are_recorded_failures(
    jobs, world, ledger
):
    """F5: a refused connection and a request past `timeout` are failures like any
    other: recorded (no status), then retried with the backoff."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    world.endpoint("down", url=f"http://127.0.0.1:{port}/hook")
    world.endpoint("slow")
    world.receiver.answer(Answer(200, hold=5))
    deliver = declare(world, ledger, timeout="1s", retry=Retry(attempts=3, delay="1h"))
    down = deliver.enqueue(endpoint_id="down", event_id="evt_01")
    slow = deliver.enqueue(endpoint_id="slow", event_id="evt_01")
    assert [a.outcome for a in jobs.run()] == ["retried", "retried"]
    for answer, endpoint_id in ((down, "down"), (slow, "slow")):
        [row] = WebhookDelivery.objects.filter(endpoint_id=endpoint_id)
        assert (row.ok, row.status) == (False, None)
        assert job_of(answer).error_code == "X_WEBHOOK_DELIVERY_FAILED"
        assert "unreachable" in job_of(answer).last_error
    assert "refused" in WebhookDelivery.objects.get(endpoint_id="down").error.lower()
    assert "timed out" in WebhookDelivery.objects.get(endpoint_id="slow").error


def test_endpoint_headers_merge_under_the_framework_headers(jobs, world, ledger):
    """F5: an endpoint row that could set the signature header could forge one."""
    world.endpoint(
        "ep2",
        headers={
            "Authorization": "Bearer partner-token",
            "x-ultimate-webhook-signature": "t=1,v1=forged",
            "X-Ultimate-Webhook-Id": "forged",
            "content-type": "text/plain",
        },
    )
    deliver = declare(world, ledger)
    deliver.enqueue(endpoint_id="ep2", event_id="evt_01")
    jobs.run()
    [request] = world.receiver.requests
    lowered = {k.lower(): v for k, v in request.headers.items()}
    assert lowered["authorization"] == "Bearer partner-token"
    assert lowered["x-ultimate-webhook-id"] == "evt_01"
    assert SIGNATURE.fullmatch(lowered["x-ultimate-webhook-signature"])
    assert lowered["content-type"] == "application/json"


def test_the_payload_tenant_must_be_the_run_tenant(jobs, world, ledger):
    """F5: the seams run under the delivery's tenant; a tenant_id the run is not
    under is X_JOB_TENANT_MISMATCH before either seam reads."""
    per_tenant = declare(world, ledger, tenant=lambda p: p["tenant_id"])
    none = declare(world, ledger, tenant=NO_TENANT)
    good = per_tenant.enqueue(endpoint_id="ep1", event_id="evt_01", tenant_id="org-1")
    bad = none.enqueue(endpoint_id="ep1", event_id="evt_01", tenant_id="org-2")
    outcomes = sorted(a.outcome for a in jobs.run())
    assert outcomes == ["completed", "dead-lettered"]
    assert job_of(good).state == "done"
    assert job_of(bad).error_code == "X_JOB_TENANT_MISMATCH"
    assert world.seen_tenants == ["org-1"]
    assert WebhookDelivery.objects.get().tenant_id == "org-1"
    assert len(world.receiver.requests) == 1


@pytest.mark.parametrize(
    "url", ["ftp://host/x", f"example.com/hook?token={SECRET}", "http:///nohost"]
)
def test_a_url_that_is_not_http_is_refused_without_naming_it(jobs, world, ledger, url):
    world.endpoint("ep2", url=url)
    answer = declare(world, ledger).enqueue(endpoint_id="ep2", event_id="evt_01")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    row = job_of(answer)
    assert row.error_code == "X_WEBHOOK_INVALID"
    assert "<the URL of endpoint ep2>" in row.last_error
    assert "s3cr3t" not in row.last_error
    assert world.receiver.requests == []


def test_a_missing_endpoint_or_event_dead_letters_without_a_request(
    jobs, world, ledger
):
    deliver = declare(world, ledger)
    gone = deliver.enqueue(endpoint_id="nope", event_id="evt_01")
    missing = deliver.enqueue(endpoint_id="ep1", event_id="nope")
    jobs.run()
    assert job_of(gone).error_code == "X_WEBHOOK_NOT_FOUND"
    assert "endpoint_id='nope'" in job_of(gone).last_error
    assert job_of(missing).error_code == "X_WEBHOOK_NOT_FOUND"
    assert world.receiver.requests == []


def test_a_drain_stops_a_request_not_yet_sent(world, ledger):
    """F5, W6: the token set before the POST stops it (JobAborted: interrupted)."""
    deliver = declare(world, ledger)
    run = Run(
        job_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        name=deliver.name,
        input={"endpoint_id": "ep1", "event_id": "evt_01"},
        attempt=1,
        max_attempts=3,
        tenant_id=None,
    )
    run.cancel_token.cancel(DRAINING)
    with pytest.raises(JobAborted, match="DRAINING"):
        deliver.func(run, endpoint_id="ep1", event_id="evt_01")
    assert world.receiver.requests == []
    assert deliveries() == []


def test_bad_declarations_and_inputs_are_refused_and_write_nothing(world, ledger):
    with pytest.raises(JobDeclarationInvalid, match="disable_after=0"):
        declare(world, ledger, disable_after=0)
    with pytest.raises(JobDeclarationInvalid, match="ledger="):
        declare(world, object())
    with pytest.raises(JobDeclarationInvalid, match="timeout="):
        declare(world, ledger, timeout="0s")
    with pytest.raises(JobDeclarationInvalid, match="endpoint="):
        webhook(
            "tests.webhook.bad",
            tenant=NO_TENANT,
            endpoint="https://example.com",  # type: ignore[arg-type]
            event=world.read_event,
            ledger=ledger,
        )
    deliver = declare(world, ledger)
    with pytest.raises(InvalidJobPayload, match="endpoint_id=''"):
        deliver.enqueue(endpoint_id="", event_id="evt_01")
    with pytest.raises(InvalidJobPayload, match="unknown parameter"):
        deliver.enqueue(endpoint_id="ep1", event_id="evt_01", url="x")
    assert Job.objects.filter(name=deliver.name).count() == 0
    described = deliver.describe()
    assert described["input"]["tenant_id"] == {
        "type": "str | None",
        "required": False,
        "default": None,
    }
    assert described["timeout"] == 15.0  # the request's 10 s plus the margin


def test_the_database_ledger_trims_old_deliveries(jobs, ledger):
    for ok in (False, True):
        ledger.record(_attempt(ok=ok))
    assert WebhookDelivery.objects.count() == 2
    assert ledger.trim(jobs.travel(seconds=1)) == 2
    assert WebhookDelivery.objects.count() == 0


def _staff(client, *codenames):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("ops", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_a_person_re_enables_an_endpoint_from_the_admin(client, ledger):
    """F5, P2: the Re-enable action needs the change permission and is audited."""
    from django.contrib.admin.models import LogEntry
    from django.urls import reverse

    from ultimate_jobs.models import WebhookEndpointState

    ledger.disable("ep9", "10 consecutive failures")
    _staff(
        client,
        "view_webhookendpointstate",
        "change_webhookendpointstate",
        "view_webhookdelivery",
    )
    ledger.record(_attempt(ok=False))
    url = reverse("admin:ultimate_jobs_webhookendpointstate_changelist")
    page = client.get(url)
    assert page.status_code == 200
    assert "10 consecutive failures" in page.content.decode()
    deliveries_page = client.get(
        reverse("admin:ultimate_jobs_webhookdelivery_changelist")
    )
    assert deliveries_page.status_code == 200
    assert "evt_x" in deliveries_page.content.decode()
    response = client.post(
        url, {"action": "enable_endpoints", "_selected_action": ["ep9"]}, follow=True
    )
    assert [str(m) for m in response.context["messages"]] == [
        "Webhook endpoints: 1 re-enabled."  # one wording for every result (issue 15)
    ]
    row = WebhookEndpointState.objects.get(pk="ep9")
    assert (row.disabled_at, row.enabled_by) == (None, "ops")
    assert not ledger.is_disabled("ep9")
    assert LogEntry.objects.filter(change_message="re-enabled via admin").count() == 1


def test_re_enabling_from_the_admin_needs_the_change_permission(client, ledger):
    from django.urls import reverse

    ledger.disable("ep9", "10 consecutive failures")
    _staff(client, "view_webhookendpointstate")
    url = reverse("admin:ultimate_jobs_webhookendpointstate_changelist")
    client.post(url, {"action": "enable_endpoints", "_selected_action": ["ep9"]})
    assert ledger.is_disabled("ep9")
