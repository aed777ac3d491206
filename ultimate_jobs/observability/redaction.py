"""What operators are shown of a job (B5): the one place every surface redacts through.

The admin (list, detail), ``manage.py jobs show/list`` (``--json`` or not),
``ultimate_jobs.api`` and the worker's logs all show a job through ``shown(name,
input)``: its input with the job's declared paths and the ``REDACT`` key patterns
replaced by ``"[redacted]"``, and ``.text()`` / ``.value()`` for what else a job
carries that a body or the library may have written from the input (the last error,
a progress note, a step's output): the input's redacted values are replaced there
too. The rules themselves are ``ultimate_jobs.declaration.redaction.Redaction``.

A job this process does not declare is redacted by the key patterns alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.redaction import REDACTED, Redaction, cached_redaction
from ultimate_jobs.declaration.registry import registry


def redaction_for(name: str) -> Redaction:
    """The redaction of the job ``name``: its declared paths and the REDACT patterns."""
    paths = registry.get(name).definition.redact if name in registry else ()
    return cached_redaction(paths, get_settings().REDACT)


@dataclass(frozen=True)
class Shown:
    """One job as operators see it: its redacted input, and the means to redact the
    rest of what it carries."""

    redaction: Redaction
    input: Any
    secrets: tuple[str, ...] = field(default=(), repr=False)

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


def shown(name: str, input: Any) -> Shown:
    """How the job ``name`` with ``input`` is shown to operators (B5)."""
    redaction = redaction_for(name)
    return Shown(redaction, redaction.apply(input), tuple(redaction.secrets(input)))


__all__ = ["REDACTED", "Shown", "redaction_for", "shown"]
