"""M2: with OpenTelemetry, each attempt runs in a span that is a CHILD of the span that
enqueued the job (the traceparent the enqueue recorded as the correlation id), named
``job <name>`` with the job's attributes and its outcome; a failure records its
exception; each step that runs is a child span. Checked with the SDK's in-memory
exporter (a test dependency only), through the worker's executor and SQL."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from tests.conftest import REPO
from tests.testapp.seed_jobs import traced
from ultimate_jobs.models import Job
from ultimate_jobs.observability import tracing

pytestmark = pytest.mark.django_db


@pytest.fixture
def exporter():
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with tracing.use_tracer_provider(provider):
        yield spans, provider.get_tracer("the-app")
    provider.shutdown()


def named(spans, name):
    return [s for s in spans.get_finished_spans() if s.name == name]


def test_each_attempt_is_a_child_of_the_enqueuing_span_with_its_attributes(
    jobs, exporter
):
    """M2: the request that enqueued the job and both attempts are one trace."""
    spans, app = exporter
    with app.start_as_current_span("POST /orders") as request:
        answer = traced.enqueue(key="order-1", fail_times=1, tenant="acme")
    origin = request.get_span_context()
    stored = Job.objects.get(pk=answer.id).correlation_id
    flags = int(origin.trace_flags)
    assert stored == f"00-{origin.trace_id:032x}-{origin.span_id:016x}-{flags:02x}"

    attempts = jobs.run()
    jobs.travel(seconds=2)  # past the retry's 1 s backoff
    attempts += jobs.run()
    assert [a.outcome for a in attempts] == ["retried", "completed"]

    first, second = sorted(
        named(spans, "job testapp.traced"), key=lambda s: s.start_time
    )
    for span, attempt, outcome in ((first, 1, "retried"), (second, 2, "completed")):
        assert span.kind is SpanKind.CONSUMER
        assert span.context.trace_id == origin.trace_id
        assert span.parent is not None
        assert span.parent.span_id == origin.span_id
        assert dict(span.attributes) == {
            "job.id": str(answer.id),
            "job.name": "testapp.traced",
            "job.queue": "default",
            "job.attempt": attempt,
            "job.tenant_id": "acme",
            "job.outcome": outcome,
        }
    # The failed attempt records its exception and is an error; the next is not.
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "RuntimeError: traced attempt 1 failed"
    [event] = first.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "traced attempt 1 failed"
    assert second.status.status_code is StatusCode.UNSET
    assert second.events == ()


def test_steps_that_run_are_child_spans_and_replayed_ones_are_not(jobs, exporter):
    """M2, S1: steps run on the first attempt only; the second replays them."""
    spans, app = exporter
    with app.start_as_current_span("request"):
        traced.enqueue(key="steps", fail_times=1)
    jobs.run()
    jobs.travel(seconds=2)
    jobs.run()
    first, second = sorted(
        named(spans, "job testapp.traced"), key=lambda s: s.start_time
    )
    steps = [s for s in spans.get_finished_spans() if s.name.startswith("step ")]
    assert [(s.name, dict(s.attributes)) for s in steps] == [
        ("step fetch", {"job.step": "fetch", "job.step.kind": "step"}),
        ("step store", {"job.step": "store", "job.step.kind": "step"}),
    ]
    assert {s.parent.span_id for s in steps} == {first.context.span_id}
    assert {s.context.trace_id for s in steps} == {first.context.trace_id}
    assert second.context.span_id not in {s.parent.span_id for s in steps}


def test_a_job_enqueued_by_a_body_is_a_child_of_that_attempt(jobs, exporter):
    """M2: inside an attempt the current span is the attempt's, so a job the body
    enqueues records the attempt's traceparent and its own span nests under it."""
    spans, app = exporter
    with app.start_as_current_span("request") as request:
        parent = traced.enqueue(key="parent", child="child")
    jobs.run()
    [outer] = [
        s
        for s in named(spans, "job testapp.traced")
        if s.attributes["job.id"] == str(parent.id)
    ]
    [inner] = [
        s
        for s in named(spans, "job testapp.traced")
        if s.attributes["job.id"] != str(parent.id)
    ]
    assert outer.parent.span_id == request.get_span_context().span_id
    assert inner.parent.span_id == outer.context.span_id
    assert inner.context.trace_id == outer.context.trace_id
    child_row = Job.objects.get(name="testapp.traced", idempotency_key="child")
    flags = int(outer.context.trace_flags)
    assert child_row.correlation_id == (
        f"00-{outer.context.trace_id:032x}-{outer.context.span_id:016x}-{flags:02x}"
    )


def test_a_job_enqueued_outside_any_span_starts_its_own_trace(jobs, exporter):
    """No traceparent on the row: the attempt's span is a root, and a correlation id
    that is not a traceparent is kept as an attribute."""
    spans, _ = exporter
    from ultimate_jobs import correlation_scope

    with correlation_scope("import-42"):
        traced.enqueue(key="plain")
    jobs.run()
    [span] = named(spans, "job testapp.traced")
    assert span.parent is None
    assert span.attributes["job.correlation_id"] == "import-42"


def test_without_opentelemetry_nothing_is_traced_and_the_job_runs(
    jobs, exporter, monkeypatch
):
    """No hard dependency: with the package absent the module does nothing."""
    spans, app = exporter
    monkeypatch.setattr(tracing, "_otel", lambda: None)
    with app.start_as_current_span("request"):
        traced.enqueue(key="absent")
    assert [a.outcome for a in jobs.run()] == ["completed"]
    assert [s.name for s in spans.get_finished_spans()] == ["request"]


def test_with_the_api_but_no_provider_set_no_span_is_started(jobs):
    """The API alone (no SDK, no provider: the API's proxy) costs an attempt no span,
    and a job its body enqueues keeps the stored correlation id."""
    job = {"correlation_id": "", "id": None, "name": "x", "queue": "q", "attempt": 1}
    assert tracing.attempt_span(job) is tracing._UNTRACED  # type: ignore[arg-type]
    assert tracing.step_span("fetch", "step") is tracing._UNTRACED
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    from ultimate_jobs import correlation_scope

    with correlation_scope(traceparent):
        traced.enqueue(key="no-sdk", child="no-sdk-child")
    assert [a.outcome for a in jobs.run()] == ["completed", "completed"]
    assert Job.objects.get(idempotency_key="no-sdk-child").correlation_id == traceparent


def test_a_worker_never_imports_opentelemetry_itself(worker_env):
    """Issue 26 (RSS): a process that never imported it has no provider and no current
    span, so the worker leaves the 3.4 MiB package unimported; tracing starts when
    the application imports it (the tests above)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, django; django.setup()\n"
            "from ultimate_jobs.runtime import worker\n"
            "from ultimate_jobs.ground import context\n"
            "assert context.current_traceparent() == ''\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n",
        ],
        cwd=REPO,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
