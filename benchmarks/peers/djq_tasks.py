"""django-q2's task: a plain function named by its dotted path."""

from __future__ import annotations

from benchmarks.record import record


def noop(n: int) -> None:
    record(n)
