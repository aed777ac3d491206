"""OpenTelemetry spans for attempts and steps (M2), when ``opentelemetry-api`` is installed.

An enqueue under a current span records that span's W3C ``traceparent`` as the job's
correlation id (ground/context.py). Each attempt then runs inside a span named
``job <name>`` that is a CHILD of that enqueuing span, so one trace shows the request
that enqueued the job and every attempt that ran it, however much later and wherever.
Its attributes name the job (``job.id``, ``job.name``, ``job.queue``, ``job.attempt``,
``job.tenant_id``) and, once the outcome is written, ``job.outcome``; a failed attempt
records its exception and sets the status to ERROR; the status text, the exception
event's message and traceback and the correlation id attribute carry the input's
redacted values as ``[redacted]`` (B5). Each step that runs (not one
replayed from storage) is a child span ``step <name>``.

Without the package nothing here does anything (no import, no cost); with the API but
no tracer provider set (or a no-op one) no span is started either, and the global
provider is looked up at most once a second until one is set. The spans come from the
global tracer provider, which the application configures
(``opentelemetry.trace.set_tracer_provider``); ``use_tracer_provider`` replaces it for
a block (tests).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ultimate_jobs.declaration.redaction import scrub_text
from ultimate_jobs.observability.redaction import redaction_for


def _otel() -> Any:
    """``opentelemetry.trace`` when this process has imported it, else None.

    Never imported here (3.4 MiB a worker does not need, issue 26): an application
    that sets a tracer provider, or runs under a span, has imported it already, and
    one that has not can have neither, so no span is recorded.
    """
    return sys.modules.get("opentelemetry.trace")


if TYPE_CHECKING:
    from ultimate_jobs.sql.rows import ClaimedJob


class Ended(Protocol):
    """How an attempt ended, as its span records it (runtime/outcomes.py, ``Attempt``)."""

    @property
    def outcome(self) -> object: ...

    @property
    def landed(self) -> bool: ...

    @property
    def error(self) -> BaseException | None: ...


INSTRUMENTATION = "ultimate_jobs"
TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# Outcomes whose attempt failed: the span's status is ERROR.
FAILED_OUTCOMES = frozenset({"retried", "dead-lettered", "dropped"})

_provider: Any = None  # None: the global tracer provider


@contextlib.contextmanager
def use_tracer_provider(provider: Any) -> Iterator[None]:
    """Take spans from ``provider`` instead of the global one inside the block."""
    global _provider  # a process-wide seam, restored on exit
    before, _provider = _provider, provider
    try:
        yield
    finally:
        _provider = before


_global_tracer: Any = None


def _tracer() -> Any:
    """The tracer of the global provider, made once (an attempt asks for it every
    time; until the application sets its provider it is a proxy that then follows
    it), or one of the provider ``use_tracer_provider`` put in place."""
    global _global_tracer  # made once per process
    if _provider is not None:
        return _otel().get_tracer(INSTRUMENTATION, tracer_provider=_provider)
    if _global_tracer is None:
        _global_tracer = _otel().get_tracer(INSTRUMENTATION)
    return _global_tracer


def is_traceparent(value: str) -> bool:
    """Whether a correlation id is a W3C traceparent (what an enqueue under a span
    records)."""
    return bool(TRACEPARENT.fullmatch(value))


class AttemptSpan:
    """The span of one attempt, or nothing (no OpenTelemetry, nothing recording)."""

    __slots__ = ("secrets", "span")

    def __init__(
        self, span: Any = None, secrets: Callable[[], Sequence[str]] | None = None
    ) -> None:
        self.span = span
        self.secrets = secrets  # the input's hidden values, found when first needed

    def _scrub(self, text: str) -> str:
        """``text`` with the input's hidden values replaced (B5)."""
        return scrub_text(text, self.secrets()) if self.secrets and text else text

    def settled(self, attempt: Ended) -> None:
        """Name the attempt's outcome; record its exception when it failed, its
        message and traceback with the input's hidden values replaced (B5)."""
        if self.span is None or not self.span.is_recording():
            return
        outcome = str(attempt.outcome) if attempt.landed else "unowned"
        self.span.set_attribute("job.outcome", outcome)
        error = attempt.error
        if error is not None:
            stack = "".join(
                traceback.format_exception(type(error), error, error.__traceback__)
            )
            self.span.add_event(
                "exception",
                {
                    "exception.type": _qualified(error),
                    "exception.message": self._scrub(str(error)),
                    "exception.stacktrace": self._scrub(stack),
                    "exception.escaped": False,
                },
            )
        if outcome in FAILED_OUTCOMES:
            described = f"{type(error).__name__}: {error}" if error else outcome
            trace = _otel()
            self.span.set_status(
                trace.Status(trace.StatusCode.ERROR, self._scrub(described)[:500])
            )

    def correlation_id(self, stored: str) -> str:
        """The correlation id the body's own enqueues record: this span's traceparent
        when the job's was one (a job the body enqueues is then a child of this
        attempt), else the stored id as it is."""
        if self.span is None or not is_traceparent(stored):
            return stored
        context = self.span.get_span_context()
        if not self.span.is_recording() or not context.is_valid:
            return stored
        return (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-"
            f"{int(context.trace_flags):02x}"
        )


class _Untraced:
    """The context of an attempt or step when nothing can record a span: no package,
    or no tracer provider set (the API's proxy) or a no-op one. Costs nothing."""

    __slots__ = ()

    def __enter__(self) -> AttemptSpan:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = AttemptSpan()
_UNTRACED = _Untraced()


_global_recording = False  # the global provider is a real one (it is set only once)
_global_checked_at = -math.inf


def _may_record() -> bool:
    """Whether a span could be recorded: a real tracer provider is in place.

    Asked per attempt, so the global provider is looked up at most once a second
    until the application has set one (from then on it stays set).
    """
    global _global_recording, _global_checked_at  # benign races: a bool, a time
    trace = _otel()
    if trace is None:
        return False
    unset = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    if _provider is not None:
        return not isinstance(_provider, unset)
    if _global_recording:
        return True
    now = time.monotonic()
    if now - _global_checked_at < 1.0:
        return False
    _global_checked_at = now
    _global_recording = not isinstance(trace.get_tracer_provider(), unset)
    return _global_recording


def attempt_span(job: ClaimedJob) -> contextlib.AbstractContextManager[AttemptSpan]:
    """Run one attempt inside ``job <name>``, a child of the enqueuing span."""
    if not _may_record():
        return _UNTRACED
    return _attempt_span(job)


def step_span(name: str, kind: str) -> contextlib.AbstractContextManager[Any]:
    """Run one step inside ``step <name>``, a child of the attempt's span."""
    if not _may_record():
        return _UNTRACED
    return _tracer().start_as_current_span(  # type: ignore[no-any-return]
        f"step {name}", attributes={"job.step": name, "job.step.kind": kind}
    )


def _qualified(error: BaseException) -> str:
    """The exception's class as OpenTelemetry names it (module.Class)."""
    kind = type(error)
    module = kind.__module__
    return (
        kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    )


def _input_secrets(job: ClaimedJob) -> Callable[[], Sequence[str]]:
    """The hidden values of the job's input (its row's declared paths, this process's
    and the REDACT patterns), found the first time they are asked for."""
    found: list[Sequence[str]] = []

    def secrets() -> Sequence[str]:
        if not found:
            value: Any = job["input"]
            if isinstance(value, str | bytes):
                try:
                    value = json.loads(value)
                except ValueError:
                    value = None
            stored = job.get("redact")
            found.append(redaction_for(job["name"], stored).secrets(value))
        return found[0]

    return secrets


@contextlib.contextmanager
def _attempt_span(job: ClaimedJob) -> Iterator[AttemptSpan]:
    from opentelemetry.trace.propagation.tracecontext import (
        TraceContextTextMapPropagator,
    )

    trace = _otel()
    secrets = _input_secrets(job)
    correlation = job["correlation_id"] or ""
    parent = (
        TraceContextTextMapPropagator().extract({"traceparent": correlation})
        if is_traceparent(correlation)
        else None
    )
    attributes: dict[str, Any] = {
        "job.id": str(job["id"]),
        "job.name": job["name"],
        "job.queue": job["queue"],
        "job.attempt": job["attempt"],
        "job.tenant_id": job["tenant_id"] or "",
    }
    if correlation and parent is None:
        attributes["job.correlation_id"] = scrub_text(correlation, secrets())
    with _tracer().start_as_current_span(
        f"job {job['name']}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield AttemptSpan(span, secrets)
