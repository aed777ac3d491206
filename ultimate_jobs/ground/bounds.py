"""Bounds on what a caller hands in (B4), checked before any statement runs.

PostgreSQL refuses some values Python accepts: a NUL character or a lone surrogate in
text or jsonb, an integer past 64 bits in a bigint, a timestamp past year 9999 that it
stores but Python cannot read back. Sent as they are, they fail inside the statement
(``X_QUERY``), which aborts the caller's transaction even when the caller catches the
error. Checked here first, they are refused with a coded error naming the field and the
value, nothing is written and the caller's transaction is as it was.

The limits on an input's size and nesting are settings (``MAX_INPUT_BYTES``,
``MAX_INPUT_DEPTH``, conf.py); callers pass them in, so this module reads no settings.
The walk over a JSON value is iterative, so a value nested a thousand deep is refused
by the depth bound, never by Python's recursion limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ultimate_jobs.ground.exceptions import (
    InputTooDeep,
    InputTooLarge,
    InstantOutOfRange,
    InvalidArgument,
    InvalidJobPayload,
)

MIN_BIGINT = -(2**63)
MAX_BIGINT = 2**63 - 1
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
HORIZON = timedelta(days=36525)  # 100 years: the latest instant is now + HORIZON
MAX_HORIZON_SECONDS = HORIZON.total_seconds()
DEFAULT_MAX_INPUT_BYTES = 1024 * 1024
DEFAULT_MAX_INPUT_DEPTH = 64


def text_problem(value: str) -> str | None:
    """Why PostgreSQL would refuse ``value`` as text, or None when it would not."""
    if "\x00" in value:
        return "holds a NUL character (PostgreSQL text cannot)"
    if not value.isascii():  # only non-ASCII text can hold a surrogate
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "holds a lone surrogate (not valid Unicode text)"
    return None


def check_text(
    value: object,
    *,
    field: str,
    max_length: int,
    job: str = "",
    error: type[InvalidArgument] = InvalidArgument,
    empty: bool = True,
) -> str:
    """A string PostgreSQL stores as it is, within its column's length."""
    if not isinstance(value, str):
        raise error(field, value, "a string", job=job)
    if not empty and not value:
        raise error(field, value, "a non-empty string", job=job)
    if len(value) > max_length:
        raise error(
            field, value, f"at most {max_length} characters (got {len(value)})", job=job
        )
    if (problem := text_problem(value)) is not None:
        raise error(field, value, problem, job=job)
    return value


def check_instant(
    value: datetime, *, field: str, job: str = "", now: datetime | None = None
) -> datetime:
    """An aware instant from 1970 to 100 years from now (B4), answered in UTC: the
    same instant, with an offset PostgreSQL takes (Python allows offsets up to 24 h,
    PostgreSQL stops at 15:59)."""
    now = now or datetime.now(UTC)
    if value < EARLIEST:
        raise InstantOutOfRange(field, value, "before 1970-01-01", job=job)
    if value > now + HORIZON:
        raise InstantOutOfRange(field, value, "more than 100 years from now", job=job)
    return value.astimezone(UTC)


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


@dataclass(frozen=True, slots=True)
class JsonProblem:
    """What ``json_problem`` found: where, the value, why, and of which kind."""

    path: str
    value: Any
    reason: str
    kind: str = "value"  # "value", "deep" (past max_depth) or "large" (past max_bytes)


Node = tuple[Any, "str | int"] | None  # (parent node, key): a path, built on demand


def _path_of(node: Node) -> str:
    keys: list[str | int] = []
    while node is not None:
        node, key = node
        keys.append(key)
    path = ""
    for key in reversed(keys):
        path = _path(path, key)
    return path


def json_problem(  # noqa: C901 - one branch per JSON type
    value: Any, *, max_depth: int, max_bytes: int | None = None
) -> JsonProblem | None:
    """The first value JSON in PostgreSQL cannot hold, walking ``value`` iteratively.

    Strings (keys too) must hold no NUL and no lone surrogate; integers fit in 64 bits;
    floats are finite; containers nest at most ``max_depth`` deep (the value itself is
    depth 1). With ``max_bytes``, text whose characters alone pass it is refused before
    anything is encoded. The path of a value is built only when it is refused.
    """
    if max_depth >= 1:  # N2: a worker decodes every input; most are flat objects
        flat = _flat_clean_chars(value)
        if flat is not None and (max_bytes is None or flat <= max_bytes):
            return None
    stack: list[tuple[Any, int, Node]] = [(value, 1, None)]
    chars = 0
    budget = max_bytes if max_bytes is not None else -1
    while stack:
        item, depth, node = stack.pop()
        kind = type(item)
        if item is None or kind is bool:
            continue
        if kind is str or isinstance(item, str):
            chars += len(item)
            if (problem := text_problem(item)) is not None:
                return JsonProblem(_path_of(node), item, problem)
        elif kind is int or (isinstance(item, int) and not isinstance(item, bool)):
            if not MIN_BIGINT <= item <= MAX_BIGINT:
                return JsonProblem(_path_of(node), item, "an integer outside 64 bits")
        elif kind is float or isinstance(item, float):
            if not math.isfinite(item):
                return JsonProblem(
                    _path_of(node), item, "not JSON-serialisable: not a finite number"
                )
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return JsonProblem(
                    _path_of(node),
                    "...",
                    f"nested deeper than {max_depth} levels",
                    "deep",
                )
            if not isinstance(item, dict):
                for index, child in enumerate(item):
                    stack.append((child, depth + 1, (node, index)))
            else:
                for key, child in item.items():
                    if type(key) is not str and not isinstance(key, str):
                        return JsonProblem(
                            _path_of(node), key, "object keys are strings"
                        )
                    chars += len(key)
                    if (problem := text_problem(key)) is not None:
                        return JsonProblem(_path_of((node, key)), key, f"key {problem}")
                    stack.append((child, depth + 1, (node, key)))
        else:
            return JsonProblem(
                _path_of(node),
                item,
                "not JSON-serialisable (str, int, float, bool, None, list, dict)",
            )
        if budget >= 0 and chars > budget:
            return JsonProblem(
                _path_of(node), chars, f"more than {max_bytes} bytes", "large"
            )
    return None


def _flat_clean_chars(value: Any) -> int | None:
    """When ``value`` is a dict of str keys to scalars that json_problem accepts (then
    the walk would answer None, or past ``max_bytes`` refuse it): the characters of
    its texts, keys included, as the walk counts them. Anything else (a container
    child, a doubt) is None and the walk decides, so its answer and its path never
    change."""
    if type(value) is not dict:
        return None
    chars = 0
    for key, child in value.items():
        if type(key) is not str or text_problem(key) is not None:
            return None
        chars += len(key)
        kind = type(child)
        if child is None or kind is bool:
            continue
        if kind is str:
            if text_problem(child) is not None:
                return None
            chars += len(child)
        elif kind is int:
            if not MIN_BIGINT <= child <= MAX_BIGINT:
                return None
        elif kind is not float or not math.isfinite(child):
            return None
    return chars


def check_json(
    job: str,
    field: str,
    value: Any,
    *,
    max_depth: int,
    max_bytes: int | None = None,
    show: Callable[[str, Any], Any] | None = None,
) -> None:
    """Refuse a JSON value PostgreSQL cannot hold (InvalidJobPayload naming the path),
    one nested past ``max_depth`` (InputTooDeep) or plainly past ``max_bytes``
    (InputTooLarge).

    ``show(path, value)`` answers what the error shows of the offending value (the
    redacted form of a value a job declared secret); None shows the value itself.
    """
    found = json_problem(value, max_depth=max_depth, max_bytes=max_bytes)
    if found is None:
        return
    if found.kind == "large" and max_bytes is not None:
        raise InputTooLarge(job, field or "input", found.value, max_bytes)
    where = _path(field, found.path) if field and found.path else (found.path or field)
    if found.kind == "deep":
        raise InputTooDeep(job, where or "input", max_depth)
    where = where or "input"
    bad = found.value if show is None else show(where, found.value)
    raise InvalidJobPayload(job, where, bad, found.reason)


def check_size(job: str, field: str, encoded: str, *, max_bytes: int) -> None:
    """Refuse an encoded JSON value longer than ``max_bytes`` (UTF-8)."""
    # Each character is at most 4 bytes: only a text near the limit is measured.
    if len(encoded) * 4 <= max_bytes:
        return
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise InputTooLarge(job, field, size, max_bytes)
