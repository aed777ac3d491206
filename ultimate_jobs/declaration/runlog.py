"""Per-attempt log capture: what a body writes through ``run.logger`` is kept with the
attempt (seed ``logMaxEntries``), bounded.

``RunLogBuffer`` holds the newest ``capacity`` lines of one attempt in memory and counts
the older ones it let go; ``RunLogger`` is the ``run.logger`` adapter that feeds it and
still hands every record on to the ``ultimate_jobs.run`` logger. Lines are redacted when
they are written (the input's redacted values, B5), so what is kept, logged and shown
to operators never holds them. Nothing here
touches the database: the executor writes the buffer in ONE statement when the attempt
ends, and only when it holds a line (observability/runlogs.py), so an attempt that logs
nothing costs nothing and one that logs costs one INSERT, never one per line.

Lines at INFO and above are kept whatever the logging configuration (a project whose
root logger sits at WARNING still sees a body's ``run.logger.info`` in the admin);
DEBUG lines only when ``ultimate_jobs.run`` is enabled for DEBUG.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections import deque
from collections.abc import Collection, MutableMapping
from datetime import UTC, datetime
from typing import Any

from ultimate_jobs.declaration.redaction import scrub_text

MAX_LINE_CHARS = 2000  # one kept line, its traceback included, at most


def bounded(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying so at the cut."""
    if len(text) <= limit:
        return text
    marker = f" … ({len(text) - limit} more characters)"
    return text[: max(limit - len(marker), 0)] + marker


_LOCK = threading.Lock()


class RunLogBuffer:
    """The newest ``capacity`` log lines of one attempt, and how many older ones were
    let go. Thread-safe: a body may log from threads of its own."""

    __slots__ = ("_lines", "_lock", "capacity", "dropped")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 0)
        # Made at the first line: an attempt that logs nothing allocates nothing more.
        self._lines: deque[dict[str, Any]] | None = None
        # One lock for every buffer (N2: no threading object per attempt); held only
        # while a line is appended, so attempts that log at once barely wait on it.
        self._lock = _LOCK
        self.dropped = 0

    def add(self, level: int, message: str) -> None:
        """Keep one line (``at`` is the wall clock, ``level`` its name)."""
        line = {
            "at": datetime.now(UTC).isoformat(),
            "level": logging.getLevelName(level),
            "message": bounded(message),
        }
        with self._lock:
            if self.capacity == 0:
                self.dropped += 1
                return
            if self._lines is None:
                self._lines = deque(maxlen=self.capacity)
            elif len(self._lines) == self.capacity:
                self.dropped += 1  # the deque lets the oldest go
            self._lines.append(line)

    def lines(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._lines or ())

    def holds(self) -> bool:
        """Whether there is anything to write: a kept line, or lines let go."""
        return self._lines is not None or self.dropped > 0

    def __len__(self) -> int:
        lines = self._lines
        return 0 if lines is None else len(lines)


def _text(msg: object, args: Any, exc_info: Any) -> str:
    try:
        text = str(msg) % args if args else str(msg)
    except (TypeError, ValueError, KeyError):
        text = f"{msg} {args!r}"
    if exc_info:
        if exc_info is True:
            exc_info = sys.exc_info()
        elif isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        if isinstance(exc_info, tuple) and exc_info[0] is not None:
            text += "\n" + "".join(traceback.format_exception(*exc_info)).rstrip()
    return text


class RunLogger(logging.LoggerAdapter[logging.Logger]):
    """``run.logger``: the attempt's fields on every record; the input's redacted values
    (B5) replaced by ``[redacted]`` in the message, its arguments, the ``extra`` fields
    and a logged traceback; and each line kept in the attempt's buffer (when it has
    one), redacted, before it goes on to the logger."""

    def __init__(
        self,
        logger: logging.Logger,
        extra: MutableMapping[str, object],
        *,
        buffer: RunLogBuffer | None = None,
        secrets: Collection[str] = (),
    ) -> None:
        super().__init__(logger, extra)
        self.buffer = buffer
        self.secrets = secrets

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        kept = self.buffer is not None and (
            level >= logging.INFO or self.logger.isEnabledFor(level)
        )
        if not self.secrets:
            if kept:
                self._keep(level, _text(msg, args, kwargs.get("exc_info")))
            super().log(level, msg, *args, **kwargs)
            return
        if not kept and not self.isEnabledFor(level):
            return
        text = scrub_text(_text(msg, args, kwargs.pop("exc_info", None)), self.secrets)
        if kept:
            self._keep(level, text)
        # The attempt's own fields too: a correlation id may quote a hidden value.
        extra = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        kwargs["extra"] = {
            key: scrub_text(value, self.secrets) if isinstance(value, str) else value
            for key, value in extra.items()
        }
        super().log(level, text, **kwargs)

    def _keep(self, level: int, text: str) -> None:
        buffer = self.buffer
        if buffer is None:
            return
        try:
            buffer.add(level, text)
        except Exception:  # noqa: S110 - capture never breaks a body's logging
            pass
