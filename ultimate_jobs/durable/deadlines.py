"""The deadlines of one attempt (S6): ``timeout`` bounds the attempt, ``step_timeout``
one step.

When a deadline passes, the run's cancel token is set with ``TIMEOUT`` (the body sees
``run.cancelled``; ``raise_if_cancelled()`` raises), and from then on every step write
is refused with ``JobAborted``. Nothing can stop a body that ignores its token, so the
attempt is failed without it: ``on_expiry`` is called at that moment, and a worker
writes the failure there and then, which makes the job claimable again while the body
may still be running; the body's late writes are fenced out. A body that finishes
anyway is logged ``jobs.timeout.abandoned`` by the executor.

An attempt is settled exactly once: ``settle_once()`` answers True to the first caller
only, the deadline or the end of the body.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ultimate_jobs.ground.cancel import TIMEOUT, CancelToken
from ultimate_jobs.ground.exceptions import JobTimeout

ATTEMPT = "attempt"


class Deadlines:
    """Timers that cancel one run's token, and the settle-once switch of its attempt."""

    def __init__(
        self,
        token: CancelToken,
        *,
        step_timeout: float | None = None,
        on_expiry: Callable[[str], None] | None = None,
    ) -> None:
        self.token = token
        self.step_timeout = step_timeout
        self.on_expiry = on_expiry
        self.expired: str | None = (
            None  # what passed its deadline: "attempt", "step 'x'"
        )
        self.settled_by_deadline = threading.Event()
        self.outcome: Any = None  # the Attempt written at the deadline, if any
        self._lock = threading.Lock()
        self._settled = False

    def arm(self, seconds: float, what: str) -> threading.Timer:
        """Cancel the token with TIMEOUT after ``seconds`` unless the timer is cancelled."""
        timer = threading.Timer(seconds, self._expire, args=(what,))
        timer.daemon = True
        timer.start()
        return timer

    def _expire(self, what: str) -> None:
        if not self.token.cancel(TIMEOUT):
            return  # already cancelled (a drain, a lost lease): that reason stands
        self.expired = what
        if self.on_expiry is not None:
            self.on_expiry(what)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Bound one step by ``step_timeout``; JobTimeout after it when it expired."""
        if self.step_timeout is None:
            yield
            return
        what = f"step {name!r}"
        timer = self.arm(self.step_timeout, what)
        try:
            yield
        finally:
            timer.cancel()
        if self.expired == what:
            raise JobTimeout(
                f"{what} ran past its step_timeout ({self.step_timeout:g}s)",
                step=name,
            )

    def settle_once(self) -> bool:
        """True for the first caller only: that one writes the attempt's outcome."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True
