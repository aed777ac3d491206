"""Keyset pages over a QuerySet in primary-key order, shared by exports (F4) and
backfills (F1).

A page is ``WHERE pk > cursor ORDER BY pk LIMIT batch + 1``: never ``OFFSET``, whose
cost grows with every page already read and which skips or repeats rows when the table
changes between pages. The one row more says whether another page follows, so a source
of exactly two pages is two pages, never an empty third. The cursor is the last primary
key read, as JSON holds it (an int or a str; a UUID as its text), so a step can
checkpoint it.

Errors are the caller's kind (``ExportInvalid``, ``BackfillInvalid``): ``invalid`` is
the class to raise, ``job`` the job whose source is refused.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet

from ultimate_jobs.ground.exceptions import InvalidArgument

Cursor = int | str | None


def check_source(
    source: object, *, invalid: type[InvalidArgument], job: str, what: str
) -> QuerySet[Any]:
    """``source`` if it is a QuerySet that can be paged by primary key."""
    if not isinstance(source, QuerySet):
        raise invalid(
            "source", type(source).__name__, "source() answers a QuerySet", job=job
        )
    if source.query.is_sliced:
        raise invalid(
            "source",
            "a sliced QuerySet",
            f"{what} pages by primary key: filter the QuerySet, do not slice it",
            job=job,
        )
    return source


def cursor_of(instance: Any, *, invalid: type[InvalidArgument], job: str) -> Cursor:
    """The cursor after ``instance``: its primary key as JSON holds it."""
    if not isinstance(instance, Model):
        raise invalid(
            "source",
            type(instance).__name__,
            "source() answers a QuerySet of model instances (not values())",
            job=job,
        )
    pk = instance.pk
    return pk if isinstance(pk, int | str) and not isinstance(pk, bool) else str(pk)


def read_page(
    source: QuerySet[Any],
    cursor: Cursor,
    batch: int,
    *,
    invalid: type[InvalidArgument],
    job: str,
) -> tuple[list[Any], bool]:
    """The next ``batch`` rows after ``cursor`` in primary-key order, and whether
    another page follows. Any ordering of the source's own is replaced."""
    ordered = source.order_by("pk")
    if cursor is not None:
        ordered = ordered.filter(pk__gt=cursor)
    rows = list(ordered[: batch + 1])
    if rows:
        cursor_of(rows[0], invalid=invalid, job=job)  # model instances, not dicts
    return rows[:batch], len(rows) > batch
