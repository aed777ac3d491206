"""Views the tests call through Django's test client (with the project's middleware)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from .jobs import chatty


def enqueue_chatty(request: HttpRequest, key: str) -> JsonResponse:
    answer = chatty.enqueue(key=key)
    return JsonResponse({"id": str(answer.id)})
