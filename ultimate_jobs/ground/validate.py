"""The field checks declarations, settings, budgets and factories share: a whole number
within bounds, a boolean, a positive number, a duration within bounds.

Each check names the field and the value it refuses, with the reason, and raises the
error its caller chooses: ``error`` is called with ``(field, value, reason)``, so a
setting raises ``ConfigurationError``, a declaration ``partial(JobDeclarationInvalid,
job=name)``, a budget ``InvalidArgument`` (the default). Callers tell refusals apart
by type or code, never by their text. Pure: no database, no settings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument, JobsError

# (field, value, reason) -> the error to raise.
Refusal = Callable[[str, object, str], JobsError]

# A whole number in ASCII digits (int() also reads other scripts' digits).
DIGITS = re.compile(r"[+-]?[0-9]{1,18}")
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def whole_reason(least: int, most: int | None) -> str:
    """How a whole number's bounds read in a refusal."""
    if most is None:
        return f"a whole number of at least {least}"
    return f"a whole number from {least} to {most}"


def whole(
    value: object,
    *,
    field: str,
    least: int = 1,
    most: int | None = None,
    error: Refusal = InvalidArgument,
    digits: bool = False,
    reason: str = "",
) -> int:
    """A whole number from ``least`` to ``most``; a bool is not one. With ``digits``
    its digits in a string are one too (a setting, an environment variable).
    ``reason`` replaces the refusal's wording (the bounds' by default)."""
    reason = reason or whole_reason(least, most)
    number: int
    if isinstance(value, bool):
        raise error(field, value, reason)
    if isinstance(value, int):
        number = value
    elif digits and isinstance(value, str):
        # ASCII digits only: int() would also read "٣" (B4, issue 31).
        if not DIGITS.fullmatch(value.strip()):
            raise error(field, value, reason)
        number = int(value.strip())
    else:
        raise error(field, value, reason)
    if number < least or (most is not None and number > most):
        raise error(field, value, reason)
    return number


def flag(
    value: object,
    *,
    field: str,
    error: Refusal = InvalidArgument,
    words: bool = False,
) -> bool:
    """True or False. With ``words``, also 1/true/yes/on and 0/false/no/off in a
    string (any other word is refused, never read as False)."""
    if isinstance(value, bool):
        return value
    if words and isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS | FALSE_WORDS:
            return word in TRUE_WORDS
        raise error(field, value, "true or false (1/0, yes/no, on/off)")
    raise error(field, value, "True or False")


def duration(
    value: object,
    *,
    field: str,
    least: float | None = None,
    most: float | None = None,
    error: Refusal = InvalidArgument,
) -> float:
    """A positive duration in seconds (a number, a timedelta, "250ms", "5m"), at least
    ``least`` and at most ``most`` seconds when given."""
    try:
        seconds = parse_duration(value, field=field)
    except InvalidArgument as exc:
        raise error(field, value, exc.reason) from None
    if least is not None and seconds < least:
        raise error(field, value, f"a duration of at least {least:g}s")
    if most is not None and seconds > most:
        raise error(field, value, f"a duration of at most {most:g}s")
    return seconds


def positive(
    value: object,
    *,
    field: str,
    error: Refusal = InvalidArgument,
    zero: bool = False,
    reason: str = "",
) -> float:
    """A finite real number above 0 (0 or more with ``zero``); a bool is not one.
    ``reason`` replaces the refusal's wording."""
    reason = reason or (
        "a finite number of at least 0" if zero else "a finite number above 0"
    )
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        raise error(field, value, reason)
    return float(value)
