"""What operators are shown of a job (B5): the one place every surface redacts through.

The admin (list, detail), ``manage.py jobs show/list`` (``--json`` or not),
``ultimate_jobs.api`` and the worker's logs (``logged_correlation``) all show a job
through ``shown(name, input)``: its input with the job's declared paths and the ``REDACT`` key patterns
replaced by ``"[redacted]"``, and ``.text()`` / ``.value()`` for what else a job
carries that a body or the library may have written from the input (the last error,
a progress note, a step's output): the input's redacted values are replaced there
too. The rules themselves are ``ultimate_jobs.declaration.redaction.Redaction``.

What must be hidden is decided at enqueue and kept with the row (``redact``: the
paths the job declared then; ``shown_key``: the idempotency key with its hidden
values replaced), so a process that does not declare the job, or a row of a job
renamed or removed since, is redacted exactly as the enqueuing process would; the
paths the reading process declares are added, never subtracted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.redaction import (
    REDACTED,
    Redaction,
    cached_redaction,
    scrub_text,
)
from ultimate_jobs.declaration.registry import registry


def redaction_for(name: str, stored: Any = None) -> Redaction:
    """The redaction of the job ``name``: the paths its row kept (``stored``, the
    ``redact`` column), those this process declares, and the REDACT patterns."""
    paths = registry.get(name).definition.redact if name in registry else ()
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except ValueError:
            stored = None
    if isinstance(stored, list) and stored:
        kept = tuple(p for p in stored if isinstance(p, str) and p)
        paths = tuple(dict.fromkeys((*kept, *paths)))
    return cached_redaction(paths, get_settings().REDACT)


@dataclass(frozen=True)
class Shown:
    """One job as operators see it: its redacted input, and the means to redact the
    rest of what it carries."""

    redaction: Redaction
    input: Any
    secrets: tuple[str, ...] = field(default=(), repr=False)
    shown_key: str | None = field(default=None, repr=False)

    def key(self, key: str) -> str:
        """The idempotency key as shown: the form kept at enqueue, else the key with
        the input's hidden values replaced."""
        if self.shown_key:
            return self.shown_key
        return self.text(key) or key

    def text(self, text: str | None) -> str | None:
        """Free text (an error, a note) with the input's redacted values replaced."""
        if not text or not self.secrets:
            return text
        return self.redaction.scrub(text, secrets=self.secrets)

    def value(self, value: Any) -> Any:
        """A JSON value (a step's output, the progress) with REDACT keys hidden and the
        input's redacted values replaced wherever they appear in its strings."""
        hidden = Redaction((), self.redaction.patterns).apply(value)
        return self._scrubbed(hidden)

    def _scrubbed(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self._scrubbed(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._scrubbed(item) for item in value]
        return value


def shown(
    name: str, input: Any, redact: Any = None, shown_key: str | None = None
) -> Shown:
    """How the job ``name`` with ``input`` is shown to operators (B5); ``redact`` and
    ``shown_key`` are what its row kept."""
    redaction = redaction_for(name, redact)
    return Shown(
        redaction,
        redaction.apply(input),
        tuple(redaction.secrets(input)),
        shown_key,
    )


def shown_correlation(
    name: str, correlation_id: str | None, input: Any, redact: Any = None
) -> str | None:
    """``correlation_id`` as a log line carries it (B5): the input's hidden values of
    the job ``name`` replaced, as the admin shows it. ``input`` is the stored JSON (a
    value or its text); ``redact`` what the row kept, when the caller has it."""
    if not correlation_id:
        return correlation_id
    if isinstance(input, str | bytes):
        try:
            input = json.loads(input)
        except ValueError:
            return correlation_id
    secrets = redaction_for(name, redact).secrets(input)
    return scrub_text(correlation_id, secrets) if secrets else correlation_id


def logged_correlation(row: Mapping[str, Any]) -> str | None:
    """The correlation id of a claimed row as the worker's log lines carry it."""
    return shown_correlation(
        row["name"], row["correlation_id"], row.get("input"), row.get("redact")
    )


def shown_row(job: Any) -> Shown:
    """How a job row (hot table, history or outbox) is shown to operators (B5)."""
    return shown(
        job.name,
        job.input,
        getattr(job, "redact", None),
        getattr(job, "shown_key", None),
    )


__all__ = [
    "REDACTED",
    "Shown",
    "logged_correlation",
    "redaction_for",
    "shown",
    "shown_correlation",
    "shown_row",
]
