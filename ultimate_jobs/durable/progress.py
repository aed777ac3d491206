"""``run.progress(done, total, note=None)`` (S7): how far a running job has come.

Written to the job row (fenced on the claim, W3) at most once a second; a value reported
sooner is held, and the last one held is written by the statement that settles the
attempt, so the row always ends with the final report. Shown by ``api.get`` (and
``manage.py jobs show``) and in the admin.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.bounds import text_problem
from ultimate_jobs.ground.cancel import CancelToken
from ultimate_jobs.ground.exceptions import InvalidArgument, JobAborted

INTERVAL = 1.0  # seconds between two writes
MAX_NOTE_LENGTH = 500


def _number(field: str, value: object) -> float | int:
    number = validate.positive(value, field=field, zero=True)
    return value if isinstance(value, int) else number


def encode_progress(done: object, total: object, note: object = None) -> str:
    """The stored JSON of one report; bad values are refused, naming the field."""
    done_ = _number("done", done)
    total_ = _number("total", total)
    if total_ == 0:
        raise InvalidArgument("total", total, "a number greater than 0")
    if note is not None and (
        not isinstance(note, str)
        or len(note) > MAX_NOTE_LENGTH
        or text_problem(note) is not None
    ):
        raise InvalidArgument(
            "note",
            note,
            f"a string of at most {MAX_NOTE_LENGTH} characters without NUL, or None",
        )
    return json.dumps({"done": done_, "total": total_, "note": note})


class Progress:
    """One attempt's progress reports, throttled to one write a second."""

    def __init__(
        self,
        write: Callable[[str], None],
        token: CancelToken,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._token = token
        self._clock = clock
        self._written_at: float | None = None
        self._pending: str | None = None

    def report(self, done: object, total: object, note: object = None) -> None:
        value = encode_progress(done, total, note)
        if self._token.is_set():
            raise JobAborted(f"{self._token.reason}, progress not recorded")
        now = self._clock()
        if self._written_at is not None and now - self._written_at < INTERVAL:
            self._pending = value
            return
        self._write(value)
        self._written_at = now
        self._pending = None

    def unsaved(self) -> str | None:
        """The last report not written yet (JSON), for the settling statement."""
        return self._pending
