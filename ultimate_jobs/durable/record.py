"""What a step checkpoint holds and how it is named and encoded (S1-S4): shared by the
journal (steps.py), its parking verbs (parking.py) and event publication (events.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.bounds import json_problem, text_problem
from ultimate_jobs.ground.durations import Duration, parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument

MAX_NAME_LENGTH = 200


@dataclass(frozen=True, slots=True)
class Stored:
    """A step an earlier attempt (or this one) recorded."""

    kind: str
    status: str
    output: Any
    wake_at: Any


def check_name(name: object, field: str = "name") -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME_LENGTH
        or text_problem(name) is not None
    ):
        raise InvalidArgument(
            field,
            name,
            f"a non-empty string of at most {MAX_NAME_LENGTH} characters, without NUL",
        )
    return name


def encode_output(job: str, name: str, value: Any) -> str:
    """The stored JSON of a step result; a value JSON (or PostgreSQL) cannot hold is
    refused: a NUL, a lone surrogate, an integer past 64 bits, nesting past
    MAX_INPUT_DEPTH (B4)."""
    found = json_problem(value, max_depth=get_settings().MAX_INPUT_DEPTH)
    if found is not None:
        raise InvalidArgument(
            f"result of step {name!r}" + (f" at {found.path}" if found.path else ""),
            found.value,
            found.reason,
            job=job,
        )
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"result of step {name!r}",
            value,
            f"a step returns JSON (dict, list, str, int, float, bool, None): {exc}",
            job=job,
        ) from None


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def sleep_name(duration: Duration) -> str:
    """The step name of ``run.sleep(duration)``: ``sleep:3d``, ``sleep:90s``."""
    if isinstance(duration, str):
        return f"sleep:{duration.strip()}"
    seconds = parse_duration(duration, field="duration")
    return f"sleep:{seconds:g}s"
