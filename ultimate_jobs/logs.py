"""Structured logs (M2): the event name is the message, the fields ride in ``extra``.

``KeyValueFormatter`` renders them as ``key=value`` pairs; the worker commands install
it on the ``ultimate_jobs`` logger when the project configured no logging of its own.
"""

from __future__ import annotations

import logging

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields a call passed in ``extra``."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class KeyValueFormatter(logging.Formatter):
    """``2026-11-30 12:00:00,000 INFO jobs.attempt.settled job_id=… outcome=completed``."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(
            f"{key}={value}" for key, value in extra_fields(record).items()
        )
        return f"{line} {fields}" if fields else line


def configure_default_logging(verbosity: int = 1) -> None:
    """Show ultimate_jobs events on stderr unless the project configured logging."""
    log = logging.getLogger("ultimate_jobs")
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
