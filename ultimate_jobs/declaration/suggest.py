"""The "did you mean" of a misspelt name: the closest of the names that exist."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate most like ``name`` (difflib's ratio of 0.6 or more), or None."""
    found = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""`` for none."""
    match = closest(name, candidates)
    return f"; did you mean {match!r}?" if match else ""
