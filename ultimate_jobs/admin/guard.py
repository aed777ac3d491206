"""No 500 from a URL (B4, issue 31): every page of the app's admin refuses a query
parameter (name or value) or an object id that PostgreSQL cannot hold as text (a NUL
character, a lone surrogate) or that is longer than any value the pages read, with a
400 answer naming the parameter and the value, before any filter, search or lookup
runs. Forms check their own fields (a CharField refuses NUL, the schedule form's input
refuses JSON nested past MAX_INPUT_DEPTH, admin/scheduling.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.urls import URLPattern

from ultimate_jobs.ground.bounds import text_problem
from ultimate_jobs.ground.exceptions import InvalidArgument

MAX_PARAMETER_CHARS = 1000  # no filter, search or id the pages read is longer

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    _Base = ModelAdmin[Any]
else:
    _Base = object


def refused(name: str, value: str) -> InvalidArgument | None:
    """Why a page refuses ``value`` of parameter ``name``, or None."""
    if len(value) > MAX_PARAMETER_CHARS:
        return InvalidArgument(name, value, f"at most {MAX_PARAMETER_CHARS} characters")
    if (problem := text_problem(value)) is not None:
        return InvalidArgument(name, value, problem)
    return None


def request_refusal(
    request: HttpRequest, object_id: str | None = None
) -> HttpResponse | None:
    """A 400 answer naming the first refused parameter or id, or None."""
    checked: list[tuple[str, str]] = []
    if object_id is not None:
        checked.append(("object_id", object_id))
    for key, values in request.GET.lists():
        checked.append(("query parameter name", key))
        checked.extend((key, value) for value in values)
    for name, value in checked:
        if (error := refused(name, value)) is not None:
            return HttpResponseBadRequest(str(error), content_type="text/plain")
    return None


def guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` behind the check of its query and of every text the URL handed it."""

    @functools.wraps(view)
    def guard(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        texts = [a for a in (*args, *kwargs.values()) if isinstance(a, str)]
        for text in texts:
            if (error := refused("object_id", text)) is not None:
                return HttpResponseBadRequest(str(error), content_type="text/plain")
        if (answer := request_refusal(request)) is not None:
            return answer
        return view(request, *args, **kwargs)

    return guard


def guard_urls(patterns: list[URLPattern]) -> list[URLPattern]:
    """``patterns`` with every view behind ``guarded`` (a page's own get_urls)."""
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = guarded(pattern.callback)
    return patterns


class InputGuard(_Base):
    """Mixed into every ModelAdmin of the app: every view its URLs route to (the
    list, the detail, history, delete and the pages' own) refuses bad input with a
    400 before it runs."""

    def get_urls(self) -> list[URLPattern]:
        return guard_urls(super().get_urls())
