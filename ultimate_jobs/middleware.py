"""``CorrelationIdMiddleware``: one correlation id per request, recorded by every job
the request enqueues and carried by every log line of their attempts (M2).

Install it early in ``MIDDLEWARE``::

    MIDDLEWARE = ["ultimate_jobs.middleware.CorrelationIdMiddleware", ...]

The id is the request's ``X-Correlation-ID`` header, else its ``X-Request-ID`` (what
load balancers and proxies set); a value that is not 1-255 printable ASCII characters
without spaces is ignored, so no header can forge a log line. Without one, a fresh id
is made, unless an OpenTelemetry span is current: then the enqueue records that
span's ``traceparent`` instead, which links the job to the trace. The response
carries the id back in ``X-Correlation-ID``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from ultimate_jobs.ground.context import correlation_scope, current_traceparent

HEADERS = ("X-Correlation-ID", "X-Request-ID")
RESPONSE_HEADER = "X-Correlation-ID"
_VALID = re.compile(r"[\x21-\x7e]{1,255}")


def correlation_id_of(request: HttpRequest) -> str:
    """The request's correlation id: a valid header, else a fresh id ('' when an
    OpenTelemetry span is current: its traceparent is recorded instead)."""
    for header in HEADERS:
        value = request.headers.get(header, "").strip()
        if _VALID.fullmatch(value):
            return value
    if current_traceparent():
        return ""
    return uuid.uuid4().hex


class CorrelationIdMiddleware:
    """Run each request under its correlation id (sync and async)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        correlation_id = correlation_id_of(request)
        with correlation_scope(correlation_id):
            response: HttpResponseBase = self.get_response(request)
        return _answer(response, correlation_id)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        correlation_id = correlation_id_of(request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]
        get_response = self.get_response
        with correlation_scope(correlation_id):
            response = await get_response(request)
        return _answer(response, correlation_id)


def _answer(response: HttpResponseBase, correlation_id: str) -> HttpResponseBase:
    if correlation_id and RESPONSE_HEADER not in response:
        response[RESPONSE_HEADER] = correlation_id
    return response
