"""Retry policies as pure functions: the backoff curve, jitter, and what an error decides."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, cast

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.durations import Duration, parse_duration
from ultimate_jobs.ground.exceptions import (
    JobDeclarationInvalid,
    JobsError,
    RetryAfter,
    Terminal,
)

_random = random.Random()  # noqa: S311 - spreads retries, nothing secret
Backoff = Literal["exponential", "linear", "fixed"]
ErrorClass = Literal["terminal", "retry"]  # what register_error_retry records
_BACKOFFS = ("exponential", "linear", "fixed")


@dataclass(frozen=True, slots=True)
class Retry:
    """How often a failing job is tried and how long it waits between tries.

    ``attempts`` counts every try, the first included: ``Retry(attempts=1)`` never
    retries. The wait before retry n (n = 1 after the first failure) is ``delay`` times
    2**(n-1) (exponential), times n (linear) or ``delay`` (fixed), capped at
    ``max_delay``. Equal jitter (half the wait fixed, half random) spreads a burst of
    failures; ``jitter=False`` gives the exact curve.
    """

    attempts: int = 5
    backoff: Backoff = "exponential"
    delay: Duration = 1
    max_delay: Duration = "5m"
    jitter: bool = True

    def __post_init__(self) -> None:
        validate.whole(
            self.attempts, field="retry.attempts", error=JobDeclarationInvalid
        )
        if self.backoff not in _BACKOFFS:
            raise JobDeclarationInvalid(
                "retry.backoff", self.backoff, f"one of {', '.join(_BACKOFFS)}"
            )
        validate.flag(self.jitter, field="retry.jitter", error=JobDeclarationInvalid)
        for field in ("delay", "max_delay"):
            seconds = parse_duration(
                getattr(self, field),
                field=f"retry.{field}",
                error=JobDeclarationInvalid,
            )
            object.__setattr__(self, field, seconds)

    @property
    def delay_seconds(self) -> float:
        return cast(float, self.delay)  # normalised to seconds in __post_init__

    @property
    def max_delay_seconds(self) -> float:
        return cast(float, self.max_delay)

    def base_delay(self, failures: int) -> float:
        """The un-jittered wait (seconds) after the ``failures``-th failed attempt."""
        if self.backoff == "exponential":
            raw = self.delay_seconds * float(2 ** min(failures - 1, 62))
        elif self.backoff == "linear":
            raw = self.delay_seconds * failures
        else:
            raw = self.delay_seconds
        return min(raw, self.max_delay_seconds)

    def next_delay(self, failures: int, rng: random.Random | None = None) -> float:
        """The wait (seconds) before the next try, jittered unless ``jitter=False``."""
        return self.spread(self.base_delay(failures), rng)

    def spread(self, seconds: float, rng: random.Random | None = None) -> float:
        """Equal jitter: half fixed, half uniformly random; exact when jitter is off."""
        seconds = min(seconds, self.max_delay_seconds)
        if not self.jitter or seconds <= 0:
            return seconds
        half = seconds / 2
        source = rng if rng is not None else _random
        return half + source.uniform(0, half)

    def stated(self, seconds: float, rng: random.Random | None = None) -> float:
        """The wait for a time a failure NAMED (``RetryAfter``): never earlier than
        named, clamped by ``max_delay``; jitter adds up to a tenth on top, so failures
        handed one instant do not all come back together. Exact with jitter off."""
        seconds = min(max(seconds, 0.0), self.max_delay_seconds)
        if not self.jitter or seconds <= 0:
            return seconds
        source = rng if rng is not None else _random
        return seconds + source.uniform(0, seconds / 10)

    def is_final_attempt(self, attempt: int) -> bool:
        """True when a failure of this attempt would not be retried for want of attempts."""
        return attempt >= self.attempts


def retry_schedule(retry: Retry) -> list[float]:
    """The un-jittered waits between tries, e.g. [1, 2, 4, 8] for 5 exponential attempts."""
    return [retry.base_delay(n) for n in range(1, retry.attempts)]


_registered: dict[type[BaseException], ErrorClass] = {}


def register_error_retry(error: type[BaseException], verdict: ErrorClass) -> None:
    """Classify an exception class: "terminal" dead-letters at once, "retry" backs off."""
    if verdict not in ("terminal", "retry"):
        raise JobDeclarationInvalid("verdict", verdict, "one of terminal, retry")
    _registered[error] = verdict


def classify(error: BaseException) -> ErrorClass | float:
    """What an exception decides: "terminal", "retry", or a RetryAfter's seconds."""
    if isinstance(error, RetryAfter):
        return error.seconds
    if isinstance(error, Terminal):
        return "terminal"
    for cls in type(error).__mro__:
        if cls in _registered:
            return _registered[cls]
    if isinstance(error, JobsError):
        return "terminal" if error.classification == "terminal" else "retry"
    return "retry"
