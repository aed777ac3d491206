"""Structured logs (M2): the event name is the message, the fields ride in ``extra``.

Every line about a job carries its ``job_id``, ``job_name``, ``queue``, ``attempt``,
``tenant_id`` and ``correlation_id``; attempts add ``outcome``, ``duration`` and a
bounded ``error``. Two formatters render them:

* ``KeyValueFormatter``: ``... INFO jobs.attempt.settled job_id=… outcome=completed``;
* ``JsonFormatter``: one JSON object per line (``event``, ``level``, ``time``,
  ``logger``, then the fields), for log pipelines.

``CorrelationFilter`` stamps the current correlation id (context.py) on records that
lack one, so a line logged by any logger inside a job body, or inside a request the
correlation middleware wraps, carries it too. The worker commands install a handler
with both on the ``ultimate_jobs`` logger when the project configured no logging of its
own (``LOG_FORMAT`` picks the formatter).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.context import current_correlation_id

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields a call passed in ``extra``."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``,
    ``\\x1b``): a value can never start a line of its own (a tenant id holding a
    newline forged log lines) nor drive a terminal."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_BARE = re.compile(r'[^\s="\\]+')


def logfmt_value(value: object) -> str:
    """A field's value as logfmt writes it: bare when it is a plain word, else in
    double quotes with ``\\`` and ``"`` escaped, so a value holding a space and an
    ``=`` (a tenant id ``"t job_id=forged"``) stays ONE field for a logfmt parser
    and can never forge another (issue 31). Control characters are escaped too."""
    text = escape_controls(str(value))
    if _BARE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class KeyValueFormatter(logging.Formatter):
    """``2026-11-30 12:00:00,000 INFO jobs.attempt.settled job_id=… outcome=completed``.

    One record is one line: control characters in the message and in every field are
    escaped (a traceback, when there is one, follows on its own lines), and a value
    that is not a plain word is quoted (``logfmt_value``).
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return escape_controls(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        head, newline, trace = line.partition("\n")
        fields = " ".join(
            f"{escape_controls(str(key))}={logfmt_value(value)}"
            for key, value in extra_fields(record).items()
        )
        head = f"{head} {fields}" if fields else head
        return f"{head}{newline}{trace}"


def _jsonable(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``event`` (the message), ``level``, ``time`` (UTC,
    ISO 8601), ``logger``, then every ``extra`` field; ``exc_info`` holds a traceback
    when there is one. A field that is not JSON (a UUID, a datetime) is rendered as
    text; the fixed keys win over an ``extra`` field of the same name."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "event": record.getMessage(),
            "level": record.levelname,
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "logger": record.name,
        }
        for key, value in extra_fields(record).items():
            payload.setdefault(key, value)
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(payload, default=_jsonable)


class CorrelationFilter(logging.Filter):
    """Add ``correlation_id`` (the current one) to a record that has none.

    Install it on a handler; it never drops a record. Outside a correlation scope, a
    record is left as it is (use ``Formatter(defaults={"correlation_id": ""})`` with
    a ``%(correlation_id)s`` format string).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "correlation_id", None):
            correlation_id = current_correlation_id()
            if correlation_id:
                record.correlation_id = correlation_id
        return True


def make_formatter(log_format: str) -> logging.Formatter:
    """The formatter for ``LOG_FORMAT``: ``text`` (key=value) or ``json``."""
    if log_format == "json":
        return JsonFormatter()
    return KeyValueFormatter("%(asctime)s %(levelname)s %(message)s")


def configure_default_logging(
    verbosity: int = 1, log_format: str | None = None
) -> None:
    """Show ultimate_jobs events on stderr unless the project configured logging.

    ``verbosity`` is the command's ``-v``: 0 shows warnings and errors only (no line per
    attempt), 1 every event, 2 debug too. ``log_format`` defaults to ``LOG_FORMAT``.
    """
    log = logging.getLogger("ultimate_jobs")
    if log.handlers or logging.getLogger().handlers:
        return
    if log_format is None:
        log_format = get_settings().LOG_FORMAT
    handler = logging.StreamHandler()
    handler.setFormatter(make_formatter(log_format))
    handler.addFilter(CorrelationFilter())
    log.addHandler(handler)
    # Django's -v: 0 warnings and errors only, 1 (the default) every event, 2+ debug.
    levels = {0: logging.WARNING, 1: logging.INFO}
    log.setLevel(levels.get(verbosity, logging.DEBUG))
