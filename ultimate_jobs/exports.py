"""Exports (F4): ``export_rows(...)`` declares a job that streams a QuerySet to a Django
storage in keyset pages, one object per page plus a manifest.

It exists because ``storage.save(key, csv(Model.objects.all()))`` works on 200 rows and
exhausts the worker's memory on two million. The artifact under ``prefix``::

    exports/<org>/<export>/part-00000.csv      header + the first page
    exports/<org>/<export>/part-00001.csv      the next page, no header
    exports/<org>/<export>/manifest.json       written last: {"parts": 2, "rows": ...}

The rules, and why:

- one object per PAGE, never one per export: a storage's ``save`` takes the whole
  content, so a single-object export holds the whole dataset in memory;
- the part key is the page INDEX, so a page that runs twice (the worker died after the
  write, before the checkpoint) REWRITES its part: a duplicate part cannot exist;
- each page is one ``run.step`` that checkpoints the CURSOR (the last primary key) and
  two counters (rows, bytes), never the rows: a step's output is kept for the whole run;
- every line ends with a line break (CRLF in CSV, as RFC 4180 has it) and only part 0
  has the header, so ``cat part-*`` is one valid file;
- ``max_part_bytes`` bounds one encoded page in memory (it is encoded whole before it
  is written); ``ExportPartTooLarge`` names the batch to lower;
- a key ``row()`` answers that ``columns`` does not carry is refused
  (``ExportUnknownColumn``): an encoder would drop it in silence, and ``row=lambda o:
  vars(o)`` would pick up every column a later migration adds;
- CSV cells that are strings starting with ``= + - @`` TAB or CR get a leading ``'``:
  spreadsheets EVALUATE them, so a user-named record would be code running in the
  reviewer's spreadsheet. Strings only: a negative number stays a number;
- the manifest COUNTS the parts and never lists them (``export_part_key`` rebuilds every
  key), because a list is the one thing in the pass that would grow with the export;
- ``rate`` (rows per second, optional) paces a large export: the pause is spent inside
  the page's step, so a replayed page re-pays none, and cancellation cuts it short.

``storage`` is a callable answering a ``Storage``, read for every write and never at
import (the storage settings may not be ready then). The source is read in primary-key
order (keyset pages, never OFFSET): ``source`` answers the rows to export, filtered to
the run's tenant by the app.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from functools import partial
from typing import Any, Literal
from uuid import UUID

from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.db.models import QuerySet

from ultimate_jobs.declaration.definition import NO_TENANT, Concurrency, NoTenant
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import CancelToken, Run
from ultimate_jobs.enqueue.factory import check_parameters, declare
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.durations import Duration
from ultimate_jobs.ground.exceptions import (
    ExportInvalid,
    ExportPartTooLarge,
    ExportUnknownColumn,
    ExportWriteConflict,
    JobDeclarationInvalid,
)
from ultimate_jobs.ground.keyset import Cursor, check_source, cursor_of, read_page

Format = Literal["csv", "jsonl"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl")
DEFAULT_BATCH = 1000
DEFAULT_MAX_PART_BYTES = 64 * 1024 * 1024
MAX_PARTS = 100_000  # part-00000 … part-99999 keep `cat part-*` in page order
MAX_PREFIX_LENGTH = 400
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
MANIFEST = "manifest.json"


def export_part_key(prefix: str, index: int, format: str) -> str:
    """The storage key of part ``index``: ``<prefix>/part-00007.csv``."""
    return f"{prefix}/part-{index:05d}.{format}"


def manifest_key(prefix: str) -> str:
    """The storage key of the manifest, written when the last part is."""
    return f"{prefix}/{MANIFEST}"


def neutralise(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading ``'`` before a formula start."""
    return "'" + text if text.startswith(FORMULA_TRIGGERS) else text


def check_prefix(value: object, *, job: str) -> str:
    """A storage prefix: relative, '/'-separated, no empty, '.' or '..' segment."""
    if not isinstance(value, str):
        raise ExportInvalid("prefix", value, "prefix() answers a string", job=job)
    prefix = value.strip("/")
    segments = prefix.split("/")
    if (
        not prefix
        or len(prefix) > MAX_PREFIX_LENGTH
        or "\\" in prefix
        or any(s in ("", ".", "..") or s != s.strip() for s in segments)
    ):
        raise ExportInvalid(
            "prefix",
            value,
            f"a relative path of at most {MAX_PREFIX_LENGTH} characters, '/'-separated, "
            "without empty, '.' or '..' segments",
            job=job,
        )
    return prefix


def _plain(value: Any, column: str, job: str) -> Any:
    """A cell as JSON sees it: str, int, float, bool, None, or Decimal (kept exact)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float | Decimal):
        if (isinstance(value, float) and not math.isfinite(value)) or (
            isinstance(value, Decimal) and not value.is_finite()
        ):
            raise ExportInvalid(f"row()[{column!r}]", value, "a finite number", job=job)
        return value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ExportInvalid(
                f"row()[{column!r}]",
                value,
                "a naive datetime names no instant: make it aware (or format it) in "
                "row()",
                job=job,
            )
        return value.isoformat()
    if isinstance(value, date | time_of_day):
        return value.isoformat()
    raise ExportInvalid(
        f"row()[{column!r}]",
        type(value).__name__,
        "cells are str, int, float, Decimal, bool, None, UUID, date or an aware "
        "datetime: format other values in row()",
        job=job,
    )


def _csv_cell(value: Any, column: str, job: str) -> str:
    plain = _plain(value, column, job)
    if plain is None:
        return ""
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(value, str):  # strings only: a negative number stays a number
        return neutralise(plain)
    return str(plain)


def _json_cell(value: Any, column: str, job: str) -> Any:
    plain = _plain(value, column, job)
    return str(plain) if isinstance(plain, Decimal) else plain


class Export:
    """The body of an export job: one page per step, then the manifest."""

    def __init__(
        self,
        name: str,
        *,
        prefix: Callable[[dict[str, Any]], str],
        source: Callable[[dict[str, Any]], QuerySet[Any]],
        columns: tuple[str, ...],
        row: Callable[[Any], Mapping[str, Any]],
        format: Format,
        storage: Callable[[], Storage],
        batch: int,
        max_part_bytes: int,
        rate: float | None = None,
    ) -> None:
        self.name = name
        self.rate = rate  # rows per second at most; None: as fast as it goes
        self.prefix = prefix
        self.source = source
        self.columns = columns
        self.known = frozenset(columns)
        self.row = row
        self.format = format
        self.storage = storage
        self.batch = batch
        self.max_part_bytes = max_part_bytes

    def __call__(self, run: Run, input: dict[str, Any]) -> dict[str, Any]:
        prefix = check_prefix(self.prefix(input), job=self.name)
        state: dict[str, Any] = {"cursor": None, "rows": 0, "bytes": 0, "more": True}
        index = 0
        while state["more"]:
            if index >= MAX_PARTS:
                raise ExportInvalid(
                    "batch",
                    self.batch,
                    f"the export passed {MAX_PARTS} parts: raise the batch",
                    job=self.name,
                )
            state = run.step(
                f"page:{index}", self._page_step(input, prefix, index, state)
            )
            index += 1
        manifest = {
            "bytes": state["bytes"],
            "columns": list(self.columns),
            "format": self.format,
            "job_id": str(run.job_id),
            "name": self.name,
            "parts": index,
            "rows": state["rows"],
            "version": 1,
        }
        run.step("manifest", lambda: self._finish(prefix, manifest))
        return manifest

    def _page_step(
        self, input: dict[str, Any], prefix: str, index: int, before: dict[str, Any]
    ) -> Callable[[CancelToken], dict[str, Any]]:
        def page(token: CancelToken) -> dict[str, Any]:
            started = time.monotonic()
            rows, more = self._read(input, before["cursor"])
            data = self._encode(rows, index)
            token.raise_if_cancelled()
            self._put(export_part_key(prefix, index, self.format), data)
            if self.rate is not None and more:
                # The pause is spent INSIDE the step, so a replayed page re-pays
                # none; the run's cancellation cuts it short.
                pause = len(rows) / self.rate - (time.monotonic() - started)
                if pause > 0:
                    token.wait(pause)
            return {
                "cursor": (
                    cursor_of(rows[-1], invalid=ExportInvalid, job=self.name)
                    if rows
                    else before["cursor"]
                ),
                "rows": before["rows"] + len(rows),
                "bytes": before["bytes"] + len(data),
                "more": more,
            }

        return page

    def _read(self, input: dict[str, Any], cursor: Cursor) -> tuple[list[Any], bool]:
        """The next page in pk order, and whether another follows."""
        source = check_source(
            self.source(input), invalid=ExportInvalid, job=self.name, what="an export"
        )
        return read_page(
            source, cursor, self.batch, invalid=ExportInvalid, job=self.name
        )

    def _encode(self, rows: Sequence[Any], index: int) -> bytes:
        """The whole page, bounded by max_part_bytes while it is built."""
        out = io.BytesIO()
        text = io.StringIO()
        # RFC 4180 line ends: a cell holding a bare CR or LF is then quoted.
        writer = csv.writer(text, lineterminator="\r\n")
        if index == 0 and self.format == "csv":
            writer.writerow(self.columns)
        for instance in rows:
            values = self.row(instance)
            if not isinstance(values, Mapping):
                raise ExportInvalid(
                    "row",
                    type(values).__name__,
                    "row() answers a mapping of column to value",
                    job=self.name,
                )
            for key in values:
                if key not in self.known:
                    raise ExportUnknownColumn(
                        "row()",
                        key,
                        f"not one of the columns {list(self.columns)}: add it to "
                        "columns or leave it out of row()",
                        job=self.name,
                    )
            if self.format == "csv":
                writer.writerow(
                    [_csv_cell(values.get(c), c, self.name) for c in self.columns]
                )
            else:
                cells = {
                    c: _json_cell(values.get(c), c, self.name) for c in self.columns
                }
                text.write(
                    json.dumps(cells, ensure_ascii=False, separators=(",", ":")) + "\n"
                )
            out.write(text.getvalue().encode("utf-8"))
            text.seek(0)
            text.truncate()
            if out.tell() > self.max_part_bytes:
                raise ExportPartTooLarge(
                    self.name, index, self.batch, self.max_part_bytes
                )
        out.write(text.getvalue().encode("utf-8"))  # the header of an empty export
        if out.tell() > self.max_part_bytes:
            raise ExportPartTooLarge(self.name, index, self.batch, self.max_part_bytes)
        return out.getvalue()

    def _storage(self) -> Storage:
        store = self.storage()  # read per write: never cached, never at import
        if not isinstance(store, Storage):
            raise ExportInvalid(
                "storage",
                type(store).__name__,
                "storage() answers a django.core.files.storage.Storage",
                job=self.name,
            )
        return store

    def _put(self, key: str, data: bytes, store: Storage | None = None) -> None:
        """Write ``key`` whole, replacing what a killed earlier run left there."""
        store = store or self._storage()
        if store.exists(key):
            store.delete(key)
        saved = store.save(key, ContentFile(data))
        if saved != key:  # another writer took the key between the delete and the save
            store.delete(saved)
            raise ExportWriteConflict(
                f"{self.name}: the storage kept {key!r} as {saved!r}; the page runs again"
            )

    def _finish(self, prefix: str, manifest: dict[str, Any]) -> int:
        """Delete parts an earlier, longer export left past the count; write the
        manifest last, so its presence means the parts are complete."""
        store = self._storage()
        parts: int = manifest["parts"]
        index = parts
        while store.exists(stale := export_part_key(prefix, index, self.format)):
            store.delete(stale)
            index += 1
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        self._put(manifest_key(prefix), text.encode("utf-8"), store)
        return index - parts


def _check_rate(rate: object, job: str) -> float | None:
    """Rows per second: a finite number above 0, or None for no pacing."""
    if rate is None:
        return None
    return validate.positive(
        rate,
        field="rate",
        error=partial(JobDeclarationInvalid, job=job),
        reason="rows per second: a finite number above 0, or None for no pacing",
    )


def _check_columns(columns: object, job: str) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise JobDeclarationInvalid(
            "columns", columns, "a non-empty list of column names", job=job
        )
    seen: set[str] = set()
    for column in columns:
        if not isinstance(column, str) or not column or column in seen:
            raise JobDeclarationInvalid(
                "columns",
                column,
                "column names are distinct non-empty strings",
                job=job,
            )
        seen.add(column)
    return tuple(columns)


def _export(
    name: str,
    *,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant,
    prefix: Callable[[dict[str, Any]], str],
    source: Callable[[dict[str, Any]], QuerySet[Any]],
    columns: Sequence[str],
    row: Callable[[Any], Mapping[str, Any]],
    format: Format,
    storage: Callable[[], Storage],
    batch: int,
    max_part_bytes: int,
    rate: float | None,
) -> Export:
    """The body of an export, its arguments checked (F4): bad ones refused by name."""
    refuse = partial(JobDeclarationInvalid, job=name)
    _check_functions(
        name, tenant=tenant, prefix=prefix, source=source, row=row, storage=storage
    )
    if format not in FORMATS:
        raise JobDeclarationInvalid("format", format, "'csv' or 'jsonl'", job=name)
    return Export(
        name,
        prefix=prefix,
        source=source,
        columns=_check_columns(columns, name),
        row=row,
        format=format,
        storage=storage,
        batch=validate.whole(batch, field="batch", error=refuse),
        max_part_bytes=validate.whole(
            max_part_bytes, field="max_part_bytes", error=refuse
        ),
        rate=_check_rate(rate, name),
    )


def _check_functions(name: str, *, tenant: object, **functions: object) -> None:
    """An export's tenant, prefix, source, row and storage are functions (F4)."""
    if tenant is not NO_TENANT and not callable(tenant):
        raise JobDeclarationInvalid(
            "tenant", tenant, "a function of the input, or NO_TENANT", job=name
        )
    for field, value in functions.items():
        if not callable(value):
            raise JobDeclarationInvalid(
                field,
                value,
                "a function (storage: of nothing, read per write)"
                if field == "storage"
                else "a function",
                job=name,
            )


def export_rows(
    name: str,
    *,
    input: Mapping[str, Any] | None = None,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant,
    prefix: Callable[[dict[str, Any]], str],
    source: Callable[[dict[str, Any]], QuerySet[Any]],
    columns: Sequence[str],
    row: Callable[[Any], Mapping[str, Any]],
    format: Format = "csv",
    storage: Callable[[], Storage],
    batch: int = DEFAULT_BATCH,
    max_part_bytes: int = DEFAULT_MAX_PART_BYTES,
    rate: float | None = None,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    description: str = "",
    retry: Retry | None = None,
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
    concurrency: int | Concurrency | None = None,
    on_settled: Callable[[Any], Any] | None = None,
    retention: Mapping[str, Any] | None = None,
) -> JobHandle:
    """Declare a job exporting a QuerySet to a storage, page by page (F4).

    ``input`` maps the job's parameters to their types (``{"org_id": str}``);
    ``tenant``, ``prefix`` and ``source`` are functions of that input, ``row`` of one
    model instance (answering a mapping over ``columns``). ``rate`` (rows per second,
    optional) paces a large export so it does not starve the database it reads. One
    live export per prefix: the prefix is the idempotency key. Answers the job's
    handle::

        export_orders = export_rows(
            "orders.export",
            input={"org_id": str, "export_id": str},
            tenant=lambda p: p["org_id"],
            prefix=lambda p: f"exports/{p['org_id']}/{p['export_id']}",
            source=lambda p: Order.objects.filter(org_id=p["org_id"]),
            columns=["id", "placed_at", "total"],
            row=lambda o: {"id": o.pk, "placed_at": o.placed_at, "total": o.total},
            storage=lambda: storages["exports"],
        )
        export_orders.enqueue(org_id="o1", export_id="2026-05")
    """
    parameters = check_parameters("export_rows", name, input)
    body = _export(
        name,
        tenant=tenant,
        prefix=prefix,
        source=source,
        columns=columns,
        row=row,
        format=format,
        storage=storage,
        batch=batch,
        max_part_bytes=max_part_bytes,
        rate=rate,
    )
    return declare(
        "export_rows",
        name,
        parameters,
        body,
        idempotency_key=lambda p: f"export:{check_prefix(prefix(p), job=name)}",
        tenant=tenant,
        queue=queue,
        priority=priority,
        description=description or f"Export rows to storage, page by page ({name}).",
        retry=retry,
        timeout=timeout,
        step_timeout=step_timeout,
        concurrency=concurrency,
        on_settled=on_settled,
        retention=retention,
    )
