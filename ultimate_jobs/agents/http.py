"""The MCP tools over streamable HTTP, as a Django view (P9).

::

    # urls.py
    path("jobs/", include("ultimate_jobs.urls")),   # the endpoint: /jobs/mcp

The caller is a Django user: a bearer token a superuser issued in the admin
(``Authorization: Bearer ujt_...``), or a logged-in session (then Django's CSRF check
applies, as to any form). Anyone else gets 401 and nothing runs. The tools then act
with that user's permissions, exactly as over stdio.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from ultimate_jobs.agents import tokens

# The headers the SDK's transport reads; Django's request.META holds them upper-cased.
_FORWARDED = (
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
)


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _unauthorized(reason: str) -> JsonResponse:
    response = JsonResponse(
        {"error": {"code": "X_UNAUTHENTICATED", "message": reason}}, status=401
    )
    response["WWW-Authenticate"] = 'Bearer realm="ultimate-jobs"'
    return response


def _pass(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def _caller(request: HttpRequest) -> tuple[Any | None, str]:
    """The user a request authenticates as, or None and why not."""
    token = _bearer(request)
    if token is not None:
        user = tokens.user_of(token)
        return user, "" if user is not None else "unknown or revoked token"
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        return None, "log in, or send Authorization: Bearer <token>"
    # A session rides on a cookie: the request must pass Django's CSRF check.
    refused = CsrfViewMiddleware(_pass).process_view(request, _pass, (), {})
    if refused is not None:
        return None, "a session needs Django's CSRF token (or use a bearer token)"
    return user, ""


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """One request of the streamable-HTTP transport, answered as the caller.

    Only POST: the server is stateless and answers each message in its response, so
    it has no stream to offer on GET and no session to end on DELETE (405, as the
    transport allows; a GET stream would hold a web worker forever)."""
    if request.method != "POST":
        refused = JsonResponse(
            {
                "error": {
                    "code": "X_METHOD_NOT_ALLOWED",
                    "message": f"{request.method}: the MCP endpoint takes POST only",
                }
            },
            status=405,
        )
        refused["Allow"] = "POST"
        return refused
    user, why = _caller(request)
    if user is None:
        return _unauthorized(why)
    from ultimate_jobs.agents.server import handle_http

    headers = [
        (name.encode(), request.headers[name].encode())
        for name in _FORWARDED
        if name in request.headers
    ]
    status, answer_headers, body = handle_http(
        user, "POST", request.path, headers, request.body
    )
    response = HttpResponse(body, status=status)
    for name, value in answer_headers:
        if name.lower() != b"content-length":
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
