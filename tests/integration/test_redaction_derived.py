"""Redaction reaches derived fields (issue 27, B5): a value hidden by ``redact=`` is
hidden inside the idempotency key, the error, the correlation id, the logs, a step's
output and the OpenTelemetry span, in its upper-case, URL-encoded and base64 forms
too; dedupe keeps the real key; the admin's search never matches the hidden part;
and a process that does not declare the job (a renamed or removed job, an admin that
does not import the job modules) still hides it, from what the row kept at enqueue.

``reset_password`` hides ``code`` by its declaration alone (not a REDACT pattern), so
a reader that only knows the patterns would show it.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.testapp.redaction_jobs import reset_password
from ultimate_jobs import REDACTED, api
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground.context import correlation_scope
from ultimate_jobs.models import Job
from ultimate_jobs.observability import tracing
from ultimate_jobs.observability.logs import (
    CorrelationFilter,
    JsonFormatter,
    make_formatter,
)
from ultimate_jobs.observability.redaction import logged_correlation

pytestmark = pytest.mark.django_db

CODE = "Zq7-planted/Code+42"
KEY_PREFIX = "reset:Zq7"  # the start of the hidden part, as a prober would type it
FORMS = (
    CODE,
    CODE.upper(),
    CODE.lower(),
    urllib.parse.quote(CODE, safe=""),
    urllib.parse.quote_plus(CODE),
    base64.b64encode(CODE.encode()).decode(),
)


def assert_clean(surface: str, text: str) -> None:
    for form in FORMS:
        assert form not in text, f"{form!r} reached {surface}"


@pytest.fixture
def undeclared() -> Iterator[None]:
    """This process no longer declares ``reset_password`` (a removed or renamed job,
    or an admin process that does not import the job modules)."""
    registry.unregister(reset_password.name)
    try:
        yield
    finally:
        registry.register(reset_password)


def planted(jobs) -> Job:
    with correlation_scope(f"req-{CODE}"):
        answer = reset_password.enqueue(user="ada", code=CODE)
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    return Job.objects.get(pk=answer.id)


def surfaces(client, job: Job) -> dict[str, str]:
    """Every operator surface's text for ``job``."""
    out: dict[str, str] = {"api.get": json.dumps(api.get(job.id))}
    out["api.list_jobs"] = json.dumps(api.list_jobs(), default=str)
    for args in (
        ("list", "--json"),
        ("list",),
        ("show", str(job.id), "--json"),
        ("show", str(job.id)),
    ):
        stream = io.StringIO()
        call_command("jobs", *args, stdout=stream)
        out[f"jobs {' '.join(args)}"] = stream.getvalue()
    page = client.get(reverse("admin:ultimate_jobs_job_change", args=[job.id]))
    assert page.status_code == 200
    out["admin detail"] = page.content.decode()
    listing = client.get(reverse("admin:ultimate_jobs_job_changelist"))
    out["admin list"] = listing.content.decode()
    return out


def test_the_key_is_shown_with_the_hidden_value_replaced_and_dedupe_keeps_it(jobs):
    first = reset_password.enqueue(user="ada", code=CODE)
    again = reset_password.enqueue(user="ada", code=CODE)
    other = reset_password.enqueue(user="ada", code="another-code-77")
    assert again.id == first.id  # dedupe: the real key
    assert other.id != first.id
    row = Job.objects.get(pk=first.id)
    assert row.idempotency_key == f"reset:{CODE}"
    assert row.shown_key == f"reset:{REDACTED}"
    assert row.redact == ["code"]
    assert api.get(first.id)["idempotency_key"] == f"reset:{REDACTED}"
    assert api.get(other.id)["idempotency_key"] == f"reset:{REDACTED}"


def test_every_surface_hides_the_value_in_every_derived_field(jobs, client, operator):
    job = planted(jobs)
    assert CODE in job.last_error or REDACTED in job.last_error
    shown = api.get(job.id)
    assert shown["idempotency_key"] == f"reset:{REDACTED}"
    assert shown["correlation_id"] == f"req-{REDACTED}"
    assert shown["input"] == {"user": "ada", "code": REDACTED}
    assert f"RuntimeError: code {REDACTED} refused" in shown["last_error"]
    for surface, text in surfaces(client, job).items():
        assert_clean(surface, text)
    assert_clean("last_error (stored)", job.last_error)


def test_a_process_that_does_not_declare_the_job_still_hides_it(
    jobs, client, operator, undeclared
):
    registry.register(reset_password)  # enqueue and run where it is declared
    job = planted(jobs)
    registry.unregister(reset_password.name)
    assert reset_password.name not in registry
    shown = api.get(job.id)
    assert shown["input"]["code"] == REDACTED
    assert shown["idempotency_key"] == f"reset:{REDACTED}"
    seen = surfaces(client, job)
    assert f"code={REDACTED}" in seen["admin detail"]  # the step's output
    for surface, text in seen.items():
        assert_clean(f"{surface} (job not declared)", text)


def test_the_admin_search_never_matches_the_hidden_part(jobs, client, operator):
    answer = reset_password.enqueue(user="ada", code=CODE)
    changelist = reverse("admin:ultimate_jobs_job_changelist")
    probe = client.get(changelist, {"q": KEY_PREFIX})
    assert str(answer.id) not in probe.content.decode()
    exact = client.get(changelist, {"key": f"reset:{CODE}"})
    assert str(answer.id) not in exact.content.decode()
    found = client.get(changelist, {"q": f"reset:{REDACTED}"})
    assert str(answer.id) in found.content.decode()
    linked = client.get(changelist, {"key": f"reset:{REDACTED}"})
    assert str(answer.id) in linked.content.decode()


def test_the_attempt_span_carries_no_hidden_value(jobs):
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with tracing.use_tracer_provider(provider):
        with correlation_scope(f"req-{CODE}"):
            reset_password.enqueue(user="ada", code=CODE)
        [attempt] = jobs.run()
    provider.shutdown()
    assert attempt.outcome == "dead-lettered"
    [span] = [s for s in spans.get_finished_spans() if s.name.startswith("job ")]
    assert span.status.description == (
        f"RuntimeError: code {REDACTED} refused ({REDACTED} {REDACTED} {REDACTED})"
    )
    [event] = [e for e in span.events if e.name == "exception"]
    event_attributes: dict[str, Any] = dict(event.attributes or {})
    span_attributes: dict[str, Any] = dict(span.attributes or {})
    assert event_attributes["exception.type"] == "RuntimeError"
    assert REDACTED in event_attributes["exception.message"]
    assert span_attributes["job.correlation_id"] == f"req-{REDACTED}"
    text = json.dumps(
        {
            "status": span.status.description,
            "attributes": span_attributes,
            "events": [dict(e.attributes or {}) for e in span.events],
        }
    )
    assert_clean("the attempt span", text)


def test_the_outbox_keeps_what_must_be_hidden_until_the_relay_publishes(jobs):
    """A transactional enqueue stages the row with its redact paths and shown key,
    and the relay publishes them with the job (O1)."""
    from django.db import transaction

    from ultimate_jobs.models import OutboxMessage

    with transaction.atomic():
        answer = reset_password.enqueue(user="ada", code=CODE)
        staged = OutboxMessage.objects.get(pk=answer.id)
    assert (staged.redact, staged.shown_key) == (["code"], f"reset:{REDACTED}")
    jobs.relay()
    published = Job.objects.get(pk=answer.id)
    assert published.idempotency_key == f"reset:{CODE}"
    assert (published.redact, published.shown_key) == (["code"], f"reset:{REDACTED}")


class _Lines(logging.Handler):
    """The worker's log lines as its default handler writes them: the correlation
    filter on, each record formatted as JSON and as key=value text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(CorrelationFilter())
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(JsonFormatter().format(record))
        self.lines.append(make_formatter("text").format(record))


def test_the_worker_log_lines_carry_the_correlation_id_as_shown(jobs):
    """The worker's own lines (``jobs.attempt.*``, ``jobs.claim.*``) and those the
    correlation filter stamps carry the correlation id with its hidden part replaced,
    exactly as the admin shows it."""
    lines = _Lines()
    log = logging.getLogger("ultimate_jobs")
    level = log.level
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    try:
        job = planted(jobs)
    finally:
        log.removeHandler(lines)
        log.setLevel(level)
    mine = [r for r in lines.records if getattr(r, "job_id", None) == str(job.id)]
    events = {r.getMessage() for r in mine}
    assert {"jobs.enqueued", "jobs.attempt.started", "jobs.attempt.failed"} <= events
    for record in mine:
        assert getattr(record, "correlation_id", None) == f"req-{REDACTED}", record.msg
    for line in lines.lines:
        assert_clean("a worker log line", line)


def test_a_claimed_row_s_correlation_id_is_logged_as_shown(undeclared):
    """The claim, lease, heartbeat and crash lines name the row they hold through
    ``logged_correlation``: the row's stored paths hide the value even where this
    process does not declare the job; an id that holds nothing hidden is unchanged."""
    row = {
        "name": reset_password.name,
        "correlation_id": f"req-{CODE.upper()}",
        "input": json.dumps({"user": "ada", "code": CODE}),
        "redact": ["code"],
    }
    assert logged_correlation(row) == f"req-{REDACTED}"
    assert logged_correlation({**row, "redact": None}) == f"req-{CODE.upper()}"
    assert logged_correlation({**row, "correlation_id": "req-42"}) == "req-42"
    assert logged_correlation({**row, "correlation_id": ""}) == ""
