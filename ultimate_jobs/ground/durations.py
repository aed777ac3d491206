"""Durations as the declarations and settings write them: seconds, timedelta or "5m"."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from ultimate_jobs.ground.bounds import MAX_HORIZON_SECONDS
from ultimate_jobs.ground.exceptions import InvalidArgument, InvalidDuration

Duration = int | float | timedelta | str

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
# ASCII digits only: \d would also match "٣" (B4).
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d|w)\s*$")


def parse_duration(
    value: object,
    *,
    field: str,
    job: str = "",
    error: type[InvalidArgument] = InvalidDuration,
) -> float:
    """Answer a positive duration in seconds; refuse zero, negative or malformed values,
    and any longer than 100 years (B4: the instant it ends at must stay readable).

    >>> parse_duration("250ms", field="poll")
    0.25
    """
    seconds: float
    if isinstance(value, bool):
        raise error(
            field, value, "a duration is a number, a timedelta or '5m'", job=job
        )
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise error(
                field,
                value,
                "expected a number and a unit: 250ms, 30s, 5m, 2h, 3d, 1w",
                job=job,
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise error(
            field, value, "a duration is a number, a timedelta or '5m'", job=job
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise error(field, value, "a duration must be positive and finite", job=job)
    if seconds > MAX_HORIZON_SECONDS:
        raise error(field, value, "a duration is at most 100 years", job=job)
    return seconds


def optional_duration(
    value: object,
    *,
    field: str,
    job: str = "",
    error: type[InvalidArgument] = InvalidDuration,
) -> float | None:
    """Like parse_duration, with None meaning "not set"."""
    return (
        None
        if value is None
        else parse_duration(value, field=field, job=job, error=error)
    )
