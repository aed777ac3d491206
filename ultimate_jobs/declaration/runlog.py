"""Per-attempt log capture: what a body writes through ``run.logger`` is kept with the
attempt (seed ``logMaxEntries``), bounded.

``RunLogBuffer`` holds the newest ``capacity`` lines of one attempt in memory and counts
the older ones it let go; ``RunLogger`` is the ``run.logger`` adapter that feeds it and
still hands every record on to the ``ultimate_jobs.run`` logger as before. Nothing here
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
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

MAX_LINE_CHARS = 2000  # one kept line, its traceback included, at most


def bounded(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying so at the cut."""
    if len(text) <= limit:
        return text
    marker = f" … ({len(text) - limit} more characters)"
    return text[: max(limit - len(marker), 0)] + marker


class RunLogBuffer:
    """The newest ``capacity`` log lines of one attempt, and how many older ones were
    let go. Thread-safe: a body may log from threads of its own."""

    __slots__ = ("_lines", "_lock", "capacity", "dropped")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 0)
        # Made at the first line: an attempt that logs nothing allocates nothing more.
        self._lines: deque[dict[str, Any]] | None = None
        self._lock = threading.Lock()
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
    """``run.logger``: the attempt's fields on every record, and each line kept in the
    attempt's buffer (when it has one) before it goes on to the logger."""

    def __init__(
        self,
        logger: logging.Logger,
        extra: MutableMapping[str, object],
        buffer: RunLogBuffer | None = None,
    ) -> None:
        super().__init__(logger, extra)
        self.buffer = buffer

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if self.buffer is not None and (
            level >= logging.INFO or self.logger.isEnabledFor(level)
        ):
            try:
                self.buffer.add(level, _text(msg, args, kwargs.get("exc_info")))
            except Exception:  # noqa: S110 - capture never breaks a body's logging
                pass
        super().log(level, msg, *args, **kwargs)
