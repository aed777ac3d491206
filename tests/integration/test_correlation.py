"""Correlation (M2): the id of the request that enqueued a job is recorded on the row
and carried by every log line of the enqueue and of the job's attempts."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry import trace

from tests.testapp.jobs import chatty
from ultimate_jobs.models import Job
from ultimate_jobs.observability.logs import CorrelationFilter, JsonFormatter

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.testapp.urls")]


@pytest.fixture
def log_lines():
    """Every log line of the process, as the JSON formatter writes it, parsed back."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(CorrelationFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # an attempt's own lines are DEBUG (N2)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(level)


def test_every_log_line_of_the_enqueue_and_the_attempt_carries_the_request_id(
    client, jobs, log_lines
):
    response = client.get("/chatty/c1", HTTP_X_CORRELATION_ID="req-7f3a9")
    assert response.status_code == 200
    assert response["X-Correlation-ID"] == "req-7f3a9"
    job_id = response.json()["id"]
    assert Job.objects.get(pk=job_id).correlation_id == "req-7f3a9"
    [attempt] = jobs.run()
    assert str(attempt.outcome) == "completed"
    lines = log_lines()
    assert [line["event"] for line in lines] == [
        "jobs.enqueued",
        "jobs.attempt.started",
        "testapp.chatty.step",  # run.logger
        "testapp.chatty.plain",  # a logger that knows nothing of the job
        "jobs.attempt.settled",
    ]
    assert [line["correlation_id"] for line in lines] == ["req-7f3a9"] * 5
    assert {line.get("job_id") for line in lines} - {None} == {job_id}


def test_a_request_without_an_id_gets_a_fresh_one_shared_by_its_jobs(
    client, jobs, log_lines
):
    response = client.get("/chatty/c2")
    made = response["X-Correlation-ID"]
    assert len(made) == 32
    assert Job.objects.get(pk=response.json()["id"]).correlation_id == made
    jobs.run()
    assert {line["correlation_id"] for line in log_lines()} == {made}
    other = client.get("/chatty/c3")["X-Correlation-ID"]
    assert other != made


def test_with_opentelemetry_the_enqueue_records_the_current_spans_traceparent(jobs):
    context = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    with trace.use_span(trace.NonRecordingSpan(context)):
        answer = chatty.enqueue(key="otel")
    row = Job.objects.get(pk=answer.id)
    assert (
        row.correlation_id == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    )
    outside = chatty.enqueue(key="no-span")
    assert Job.objects.get(pk=outside.id).correlation_id == ""
