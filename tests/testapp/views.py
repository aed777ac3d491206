"""Views the tests call through Django's test client (with the project's middleware)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse

from tests.taskapi import TaskResultDoesNotExist, default_task_backend

from .jobs import chatty
from .upstream_tasks import calculate_meaning_of_life


def enqueue_chatty(request: HttpRequest, key: str) -> JsonResponse:
    answer = chatty.enqueue(key=key)
    return JsonResponse({"id": str(answer.id)})


def _task_answer(result: Any) -> JsonResponse:
    """The JSON the django-tasks backport's test views answer for a TaskResult."""
    if result.status == "SUCCESSFUL":
        value = result.return_value
    elif result.status == "FAILED":
        value = result.errors[0].traceback
    else:
        value = None
    return JsonResponse(
        {"result_id": result.id, "result": value, "status": str(result.status)}
    )


def meaning_of_life(request: HttpRequest) -> JsonResponse:
    return _task_answer(calculate_meaning_of_life.enqueue())


async def meaning_of_life_async(request: HttpRequest) -> JsonResponse:
    return _task_answer(await calculate_meaning_of_life.aenqueue())


async def task_result(request: HttpRequest, result_id: str) -> JsonResponse:
    try:
        result = await default_task_backend.aget_result(result_id)
    except TaskResultDoesNotExist:
        raise Http404 from None
    return _task_answer(result)
