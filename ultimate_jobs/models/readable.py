"""QuerySets that read around rows Python cannot read (B4).

A row written by hand or by an older version may hold a value PostgreSQL stores and
Python cannot load: a timestamp past year 9999 or before year 1, ``infinity``, a JSON
integer of thousands of digits. Loading a page that holds one fails the whole page:
the admin's job list answers 500 and ``jobs list`` crashes. ``ReadableQuerySet``
answers the rows it can read instead: when loading fails, it reads the page's ids
(always readable), loads them one by one, leaves out the ones that fail, logs
``jobs.row.unreadable`` naming each and keeps them in ``queryset.unreadable`` as
``(id, error)`` for the caller to show. A page without such a row costs nothing extra.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from django.db import DataError, models
from django.db.models.query import ModelIterable

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=models.Model)

# What loading a value may raise (the driver's DataError arrives wrapped by Django).
UNREADABLE = (DataError, ValueError, RecursionError, OverflowError)


class ReadableQuerySet(models.QuerySet[M]):
    """A QuerySet whose evaluation skips (and names) the rows Python cannot read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unreadable: list[tuple[Any, str]] = []

    def _fetch_all(self) -> None:
        if self._result_cache is None and self._iterable_class is ModelIterable:
            try:
                super()._fetch_all()
            except UNREADABLE as exc:
                self._result_cache = self._readable(exc)
        super()._fetch_all()  # prefetches, or the result of a values() query

    def _readable(self, error: BaseException) -> list[M]:
        try:
            pks = list(self._chain().values_list("pk", flat=True))  # type: ignore[attr-defined]
        except UNREADABLE:
            raise error from None  # not a row's value: the query itself failed
        rows: list[M] = []
        for pk in pks:
            one: models.QuerySet[M] = models.QuerySet(self.model, using=self.db)
            one = one.filter(pk=pk)
            one.query.select_related = self.query.select_related
            try:
                rows.extend(one)
            except UNREADABLE as exc:
                self.unreadable.append((pk, f"{type(exc).__name__}: {exc}"))
        if not self.unreadable:
            raise error
        for pk, reason in self.unreadable:
            logger.error(
                "jobs.row.unreadable",
                extra={
                    "table": self.model._meta.db_table,
                    "row_id": str(pk),
                    "error": reason[:300],
                },
            )
        return rows
