"""Redaction (B5): which values of a job's input no operator surface may show.

Two rules decide, and one ``Redaction`` holds both:

* the job's own paths, ``@job(redact=("password", "card.number"))``: a dotted path
  from the input's top level; a list on the way is walked item by item, so
  ``"cards.number"`` hides the number of every card;
* the ``REDACT`` setting's key patterns (default: password, secret, token,
  authorization, api_key, cookie): a key that contains a pattern, ignoring case, is
  hidden wherever it is nested.

A hidden value, whatever its type, is shown as the string ``"[redacted]"``.
``Redaction.apply`` answers the shown copy (the stored input is never changed: the
body receives the real value); ``Redaction.secrets`` answers the hidden values as
text, and ``Redaction.scrub`` replaces them in free text (an error message, a log
line, a progress note), for the texts a body or a library writes from the input.

This module is pure (no settings, no registry): ``ultimate_jobs.observability.redaction``
builds the Redaction of a job by name and is what every surface calls.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.ground.exceptions import JobDeclarationInvalid

REDACTED = "[redacted]"
DEFAULT_PATTERNS = (
    "password",
    "secret",
    "token",
    "authorization",
    "api_key",
    "cookie",
)
MIN_SECRET_CHARS = 4  # shorter hidden values are not scrubbed from free text
_CONTAINERS = (dict, list, tuple)  # JSON values: what an input is made of


def check_paths(
    value: object, *, job: str, parameters: Iterable[str] | None
) -> tuple[str, ...]:
    """Check ``@job(redact=...)``: dotted paths whose first part is a parameter
    (any name when the function takes ``**kwargs``: ``parameters`` is None)."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise JobDeclarationInvalid(
            "redact",
            value,
            "a tuple of input paths, e.g. ('password', 'card.number')",
            job=job,
        )
    known = None if parameters is None else set(parameters)
    out = []
    for path in value:
        parts = path.split(".") if isinstance(path, str) else []
        if not parts or not all(parts):
            raise JobDeclarationInvalid(
                "redact",
                path,
                "a dotted path of input keys, e.g. 'card.number'",
                job=job,
            )
        if known is not None and parts[0] not in known:
            raise JobDeclarationInvalid(
                "redact",
                path,
                f"{parts[0]!r} is not a parameter (expected: {', '.join(sorted(known)) or 'none'})",
                job=job,
            )
        out.append(path)
    return tuple(out)


@dataclass(frozen=True)
class Redaction:
    """The paths one job declared and the key patterns of the REDACT setting."""

    paths: tuple[str, ...] = ()
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    split: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    _keys: dict[str, bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(p.lower() for p in self.patterns))
        object.__setattr__(
            self, "split", tuple(tuple(path.split(".")) for path in self.paths)
        )
        object.__setattr__(self, "_keys", {})

    def hides_key(self, key: str) -> bool:
        """Whether a key matches a pattern (anywhere in the input)."""
        known = self._keys.get(key)
        if known is None:
            lowered = key.lower()
            known = any(pattern in lowered for pattern in self.patterns)
            if len(self._keys) < 10_000:  # the keys a deployment's jobs use
                self._keys[key] = known
        return known

    def hides_path(self, path: str) -> bool:
        """Whether the value at a dotted path (an error's field: ``card.number``,
        ``cards[2].number``) is hidden by a declared path or a key pattern."""
        parts = [
            p for p in path.replace("[", ".[").split(".") if p and not p.startswith("[")
        ]
        if any(self.hides_key(part) for part in parts):
            return True
        return any(tuple(parts[: len(declared)]) == declared for declared in self.split)

    def apply(self, value: Any) -> Any:
        """A copy of ``value`` with every hidden value replaced by ``"[redacted]"``."""
        return self._walk(value, list(self.split))

    def _walk(self, value: Any, paths: list[tuple[str, ...]]) -> Any:
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                name = str(key)
                below = [p[1:] for p in paths if p and p[0] == name]
                if self.hides_key(name) or any(not p for p in below):
                    out[key] = REDACTED
                else:
                    out[key] = self._walk(item, below)
            return out
        if isinstance(value, list | tuple):
            return [self._walk(item, paths) for item in value]
        return value

    def secrets(self, value: Any) -> list[str]:
        """The hidden values of ``value`` as text (each string, number or nested value
        under a hidden key), longest first, for ``scrub``."""
        found: set[str] = set()
        stack: list[tuple[Any, tuple[tuple[str, ...], ...]]] = [(value, self.split)]
        while stack:
            item, paths = stack.pop()
            if isinstance(item, dict):
                for key, child in item.items():
                    name = key if type(key) is str else str(key)
                    below = tuple(p[1:] for p in paths if p[0] == name) if paths else ()
                    if self.hides_key(name) or () in below:
                        found.update(
                            t for t in _texts(child) if len(t) >= MIN_SECRET_CHARS
                        )
                    elif isinstance(child, _CONTAINERS):
                        stack.append((child, below))
            elif isinstance(item, list | tuple):
                stack.extend(
                    (child, paths) for child in item if isinstance(child, _CONTAINERS)
                )
        if not found:
            return []
        return sorted(found, key=lambda text: (-len(text), text))

    def scrub(
        self, text: str, value: Any = None, *, secrets: Iterable[str] = ()
    ) -> str:
        """``text`` with each hidden value of ``value`` (and each of ``secrets``)
        replaced by ``[redacted]``, in the forms a message prints it: as it is, as a
        Python repr and as JSON."""
        return scrub_text(text, [*self.secrets(value), *secrets])


class LazySecrets:
    """A value's hidden texts, found the first time they are asked for: an attempt
    whose body logs nothing and succeeds never walks its input for them."""

    def __init__(self, redaction: Redaction, value: Any) -> None:
        self._redaction = redaction
        self._value = value

    @functools.cached_property
    def texts(self) -> tuple[str, ...]:
        return tuple(self._redaction.secrets(self._value))

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    def __contains__(self, text: object) -> bool:
        return text in self.texts


@functools.lru_cache(maxsize=1024)
def cached_redaction(paths: tuple[str, ...], patterns: tuple[str, ...]) -> Redaction:
    """The Redaction of ``paths`` and ``patterns``, made once and reused (it caches
    which keys its patterns match)."""
    return Redaction(paths, patterns)


def _texts(value: Any) -> Iterator[str]:
    """Every text form a hidden value may take in a message."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret in ``text``, in each form a message may carry it
    (``encoded_forms``), ignoring case."""
    if not text:
        return text
    pattern = _pattern(tuple(s for s in secrets if len(s) >= MIN_SECRET_CHARS))
    if pattern is None:
        return text
    return pattern.sub(REDACTED, text)


def encoded_forms(secret: str) -> set[str]:
    """The forms of one hidden value that are scrubbed (B5): as it is, its Python repr
    and JSON string bodies, URL-encoded (``quote`` and ``quote_plus``, so ``%2F`` and
    ``+`` forms), and base64 of its UTF-8 bytes (standard and URL-safe alphabets, with
    and without padding). Matching ignores case, so an uppercased or lowercased copy
    is scrubbed too."""
    data = secret.encode("utf-8", "surrogatepass")
    forms = {
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
    }
    for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        text = encoded.decode("ascii")
        forms.update((text, text.rstrip("=")))
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


@functools.lru_cache(maxsize=256)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive alternation of every form of ``secrets``, longest first."""
    forms: set[str] = set()
    for secret in secrets:
        forms |= encoded_forms(secret)
    if not forms:
        return None
    ordered = sorted(forms, key=lambda form: (-len(form), form))
    return re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)


# Secrets in webhook URL paths (WEBHOOK_SECRET_PATTERNS' default, B6): regular
# expressions searched in a URL's path; group 1 (else the match) is the secret.
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    r"/services/(T[^/]+/B[^/]+/[^/?#]+)",  # Slack: /services/T…/B…/token
    r"/api/webhooks/([^/]+/[^/?#]+)",  # Discord: /api/webhooks/id/token
    r"/webhookb2/([^?#]+)",  # Microsoft Teams (webhook.office.com)
    r"/hooks/catch/([^?#]+)",  # Zapier
    r"/hooks/([A-Za-z0-9]{16,})",  # Mattermost, Rocket.Chat
    r"/bot([0-9]+:[A-Za-z0-9_-]+)",  # Telegram bot token
    r"(?<=/)([A-Za-z0-9_\-]{24,})(?=/|$)",  # any long token-like path segment
)
