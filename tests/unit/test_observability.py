"""Observability pieces that need no database (M1-M3): log formatters and the
correlation filter, the correlation middleware, OpenTelemetry capture, the collector's
failure path, threshold checks and the supervisor's child command line."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import uuid
from datetime import UTC, datetime

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from opentelemetry import trace
from prometheus_client import CollectorRegistry, generate_latest

from ultimate_jobs import (
    ConfigurationError,
    InvalidArgument,
    InvalidDuration,
    correlation_scope,
    current_correlation_id,
)
from ultimate_jobs.conf import load_settings
from ultimate_jobs.ground.context import current_traceparent
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.health import Thresholds, judge, readiness
from ultimate_jobs.management.supervisor import child_command
from ultimate_jobs.middleware import CorrelationIdMiddleware
from ultimate_jobs.observability.exposition import MetricsServer
from ultimate_jobs.observability.logs import (
    CorrelationFilter,
    JsonFormatter,
    KeyValueFormatter,
    make_formatter,
)
from ultimate_jobs.observability.metrics import QueueCollector
from ultimate_jobs.observability.stats import QueueStats

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def record(message="jobs.attempt.settled", exc_info=None, **extra):
    item = logging.LogRecord(
        "ultimate_jobs.runtime.executor",
        logging.INFO,
        __file__,
        1,
        message,
        (),
        exc_info,
    )
    for key, val in extra.items():
        setattr(item, key, val)
    return item


def span():
    context = trace.SpanContext(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.use_span(trace.NonRecordingSpan(context))


# -- logs (M2) --------------------------------------------------------------------


def test_the_json_formatter_writes_one_parseable_object_per_line():
    job_id = uuid.uuid4()
    line = JsonFormatter().format(
        record(
            job_id=job_id,
            outcome="completed",
            attempt=2,
            duration=0.25,
            at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            tags={"a"},
            level="an extra that must not win",
        )
    )
    assert "\n" not in line
    data = json.loads(line)
    assert data["event"] == "jobs.attempt.settled"
    assert (data["level"], data["logger"]) == ("INFO", "ultimate_jobs.runtime.executor")
    assert data["time"].endswith("+00:00")
    assert data["job_id"] == str(job_id)
    assert (data["outcome"], data["attempt"], data["duration"]) == (
        "completed",
        2,
        0.25,
    )
    assert data["at"] == "2026-01-02T03:04:05+00:00"
    assert data["tags"] == ["a"]
    assert list(data)[:4] == ["event", "level", "time", "logger"]


def test_the_json_formatter_keeps_the_traceback_inside_the_object():
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        item = record("jobs.attempt.crashed", exc_info=sys.exc_info())
    line = JsonFormatter().format(item)
    assert len(line.splitlines()) == 1
    data = json.loads(line)
    assert "RuntimeError: boom" in data["exc_info"]
    assert "Traceback" in data["exc_info"]


def test_the_log_format_setting_picks_the_formatter():
    assert load_settings({}, {}).LOG_FORMAT == "text"
    assert load_settings({}, {"ULTIMATE_JOBS_LOG_FORMAT": "json"}).LOG_FORMAT == "json"
    with pytest.raises(ConfigurationError) as info:
        load_settings({"LOG_FORMAT": "xml"}, {})
    assert info.value.key == "LOG_FORMAT"
    assert isinstance(make_formatter("json"), JsonFormatter)
    assert isinstance(make_formatter("text"), KeyValueFormatter)


def test_the_correlation_filter_stamps_the_current_id_and_keeps_an_explicit_one():
    stamp = CorrelationFilter()
    outside = record()
    assert stamp.filter(outside) is True
    assert not hasattr(outside, "correlation_id")
    with correlation_scope("req-1"):
        inside = record()
        explicit = record(correlation_id="job-own")
        assert stamp.filter(inside) and stamp.filter(explicit)
    assert inside.correlation_id == "req-1"
    assert explicit.correlation_id == "job-own"


# -- correlation and OpenTelemetry (M2) ---------------------------------------------


def test_the_current_span_gives_the_traceparent_and_an_explicit_scope_wins():
    assert current_traceparent() == ""
    assert current_correlation_id() == ""
    with span():
        assert current_traceparent() == TRACEPARENT
        assert current_correlation_id() == TRACEPARENT
        with correlation_scope("req-9"):
            assert current_correlation_id() == "req-9"
    assert current_correlation_id() == ""


def seen_by_view():
    seen = []

    def view(request):
        seen.append(current_correlation_id())
        return HttpResponse("ok")

    return seen, view


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"HTTP_X_CORRELATION_ID": "req-42"}, "req-42"),
        ({"HTTP_X_REQUEST_ID": "lb-7"}, "lb-7"),
        ({"HTTP_X_CORRELATION_ID": "a", "HTTP_X_REQUEST_ID": "b"}, "a"),
    ],
)
def test_the_middleware_takes_the_request_header(headers, expected):
    seen, view = seen_by_view()
    response = CorrelationIdMiddleware(view)(RequestFactory().get("/", **headers))
    assert seen == [expected]
    assert response["X-Correlation-ID"] == expected
    assert current_correlation_id() == ""  # restored after the request


@pytest.mark.parametrize("bad", ["", "has space", "new\nline", "x" * 256, "é"])
def test_the_middleware_ignores_a_header_that_could_forge_a_log_line(bad):
    seen, view = seen_by_view()
    request = RequestFactory().get("/")
    request.META["HTTP_X_CORRELATION_ID"] = bad
    response = CorrelationIdMiddleware(view)(request)
    assert len(seen[0]) == 32
    assert seen[0] != bad
    int(seen[0], 16)  # a fresh uuid4 hex
    assert response["X-Correlation-ID"] == seen[0]


def test_the_middleware_leaves_the_traceparent_to_a_current_span():
    seen, view = seen_by_view()
    with span():
        response = CorrelationIdMiddleware(view)(RequestFactory().get("/"))
    assert seen == [TRACEPARENT]
    assert "X-Correlation-ID" not in response


def test_the_middleware_works_for_async_views():
    seen = []

    async def view(request):
        seen.append(current_correlation_id())
        return HttpResponse("ok")

    middleware = CorrelationIdMiddleware(view)
    request = RequestFactory().get("/", HTTP_X_CORRELATION_ID="async-1")
    response = asyncio.run(middleware(request))
    assert seen == ["async-1"]
    assert response["X-Correlation-ID"] == "async-1"


# -- metrics (M1) ---------------------------------------------------------------------


class Down:
    def run(self, query, /, **params):
        raise QueryError(query.name, "connection refused")


def test_a_failed_queue_read_leaves_the_gauges_out_and_serves_the_rest(caplog):
    registry = CollectorRegistry()
    registry.register(QueueCollector(Down()))
    caplog.set_level(logging.WARNING, logger="ultimate_jobs.observability.metrics")
    text = generate_latest(registry).decode()
    assert "ultimate_jobs_queue_depth{" not in text
    assert [r.getMessage() for r in caplog.records] == ["jobs.metrics.collect-failed"]


@pytest.mark.parametrize("port", [0, -1, 65536, "9100", True])
def test_the_metrics_port_must_be_a_tcp_port(port):
    with pytest.raises(InvalidArgument) as info:
        MetricsServer(port)
    assert info.value.field == "--metrics-port"


def test_supervised_children_neither_fork_nor_listen():
    argv = ["python", "manage.py", "jobs_worker", "--processes", "2"]
    argv += ["--metrics-port", "9100", "--concurrency", "4", "--processes=3"]
    argv += ["--metrics-port=9200", "--queues", "a"]
    assert child_command(argv) == [
        "python",
        "manage.py",
        "jobs_worker",
        "--concurrency",
        "4",
        "--queues",
        "a",
    ]


# -- readiness (M3) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field", "error"),
    [
        ({"max_depth": -1}, "max_depth", InvalidArgument),
        ({"max_depth": True}, "max_depth", InvalidArgument),
        ({"max_depth": "10"}, "max_depth", InvalidArgument),
        ({"max_lag": "soon"}, "max_lag", InvalidDuration),
        ({"max_lag": 0}, "max_lag", InvalidDuration),
        ({"min_workers": -1}, "min_workers", InvalidArgument),
        ({"queues": "default"}, "queues", InvalidArgument),
        ({"queues": ["Bad Name"]}, "queues", InvalidArgument),
    ],
)
def test_bad_thresholds_are_refused_naming_the_field(kwargs, field, error):
    with pytest.raises(error) as info:
        readiness(**kwargs)
    assert info.value.field == field


def test_thresholds_are_inclusive():
    thresholds = Thresholds.of(max_depth=3, max_lag="1m", min_workers=1)
    at_limit = [QueueStats("q", depth=3, oldest_ready_seconds=60.0)]
    assert judge(at_limit, 1, thresholds).ready
    over = [QueueStats("q", depth=4, oldest_ready_seconds=60.5)]
    answer = judge(over, 0, thresholds)
    assert not answer.ready
    assert answer.problems == (
        "queue 'q': depth 4 > max_depth 3",
        "queue 'q': oldest due job waited 60.5s > max_lag 60s",
        "0 live worker(s) < min_workers 1",
    )


LOGFMT_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s]*)')


def logfmt(line: str) -> list[tuple[str, str]]:
    """The key=value pairs a logfmt parser reads from a line (quoted values unquoted)."""
    pairs = []
    for key, value in LOGFMT_PAIR.findall(line):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        pairs.append((key, value))
    return pairs


@pytest.mark.parametrize(
    "tenant",
    [
        "t job_id=forged",
        't" job_id="forged',
        "t\\ job_id=forged",
        "a=b",
        "",
        "t\njob_id=forged",
    ],
)
def test_a_value_cannot_forge_a_field_of_the_text_format(tenant):
    """Issue 31: values are quoted in the text format, so a tenant id holding a space
    and ``job_id=`` stays one field for a logfmt parser."""
    line = KeyValueFormatter().format(record(tenant_id=tenant, job_id="real"))
    assert len(line.splitlines()) == 1
    pairs = logfmt(line)
    assert [v for k, v in pairs if k == "job_id"] == ["real"]
    assert [k for k, _ in pairs] == ["tenant_id", "job_id"]
