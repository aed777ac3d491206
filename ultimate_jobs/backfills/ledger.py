"""The backfill ledger (F1): one row per pass, written by the pass and the command,
read by every operator surface through ONE projection (``read``), so the command, the
Python API and the admin cannot report different numbers.

Statuses (``BackfillStatus``): ``pending`` (queued by ``db_backfill --write``, no
worker has started it), ``running``, ``done``, ``failed`` (its last attempt failed: the
queue retries it or has dead-lettered it). The projection reports a pending or running
row whose job finished without completing it, or is gone, as ``failed``: a worker
killed on its final attempt writes nothing.

The rows are a report. Where a resumed pass restarts is the answer of its steps, and
there is only one such answer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.sql import QUERIES

MAX_LIST = 1000


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One pass as the projection reports it."""

    id: int
    name: str
    checksum: str
    status: str
    app_version: str
    job_id: uuid.UUID | None
    job_state: str | None
    forced: bool
    rows: int
    batches: int
    last_cursor: Any
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    error: str

    def as_json(self) -> dict[str, Any]:
        """The stable JSON of ``db_backfill --list --json``."""
        out = asdict(self)
        for key in ("job_id", "created_at", "started_at", "completed_at"):
            value = out[key]
            out[key] = None if value is None else str(value)
        return out


def _db() -> DjangoDatabase:
    return DjangoDatabase(get_settings().DATABASE)


def read(
    *,
    names: Sequence[str] | None = None,
    newest: bool = False,
    status: str | None = None,
    job_ids: Sequence[uuid.UUID] | None = None,
    limit: int = MAX_LIST,
) -> list[LedgerRow]:
    """Ledger rows, newest first: of ``names`` (default every name), only each name's
    newest row with ``newest``, of one ``status``, of the jobs ``job_ids``, at most
    ``limit``."""
    rows = _db().run(
        QUERIES["backfill_ledger"],
        names=None if names is None else list(names),
        newest=newest,
        status=status,
        job_ids=None if job_ids is None else list(job_ids),
        limit=limit,
    )
    out = []
    for row in rows:
        cursor = row["last_cursor"]
        row["last_cursor"] = None if cursor is None else json.loads(cursor)
        out.append(LedgerRow(**row))
    return out


def by_job(job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, LedgerRow]:
    """The pass each of these jobs sweeps, by job id (F2: the job views show it); a
    job that is no backfill's run has none."""
    if not job_ids:
        return {}
    return {
        row.job_id: row
        for row in read(job_ids=job_ids, limit=len(job_ids))
        if row.job_id is not None
    }


def newest_by_name(names: Sequence[str]) -> dict[str, LedgerRow]:
    """Each name's newest pass (a name that never ran has none)."""
    return {row.name: row for row in read(names=names, newest=True)}


def record_enqueued(
    *, name: str, checksum: str, job_id: uuid.UUID, forced: bool
) -> None:
    """A pass the command put on the queue: pending until a worker starts it."""
    _db().run(
        QUERIES["backfill_enqueued"],
        name=name,
        checksum=checksum,
        app_version=get_settings().APP_VERSION,
        job_id=job_id,
        forced=forced,
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a name stands when an attempt of one of its runs starts."""

    own: dict[str, Any] | None  # the run's own row (a retry adopts it)
    newest: dict[str, Any] | None  # the name's newest row, the run's own or another

    @property
    def completed(self) -> bool:
        """Another run completed the name's newest pass: this run is a no-op."""
        return (
            self.own is None
            and self.newest is not None
            and self.newest["status"] == "done"
        )


class PassLedger:
    """The ledger as one attempt of one pass writes it."""

    def __init__(
        self,
        *,
        name: str,
        job_id: uuid.UUID,
        now: Callable[[], Any],
        db: Database | None = None,
    ) -> None:
        self.name = name
        self.job_id = job_id
        self.now = now
        self.db = db or _db()
        self.id: int | None = None

    def standing(self) -> Standing:
        rows = self.db.run(
            QUERIES["backfill_standing"], name=self.name, job_id=self.job_id
        )
        own = next((row for row in rows if row["own"]), None)
        newest = max(rows, key=lambda row: row["id"], default=None)
        return Standing(own=own, newest=newest)

    def start(self, *, checksum: str, forced: bool) -> dict[str, Any]:
        [row] = self.db.run(
            QUERIES["backfill_start"],
            name=self.name,
            checksum=checksum,
            app_version=get_settings().APP_VERSION,
            job_id=self.job_id,
            forced=forced,
            now=self.now(),
        )
        self.id = row["id"]
        return dict(row)

    def progress(self, *, rows: int, batches: int, cursor: Any) -> None:
        if self.id is not None:
            self.db.run(
                QUERIES["backfill_progress"],
                id=self.id,
                rows=rows,
                batches=batches,
                last_cursor=json.dumps(cursor),
            )

    def complete(self) -> None:
        """The source ran dry (and count() agreed): the pass is done."""
        self._finish("done", "")

    def fail(self, error: str) -> None:
        """This attempt failed; the queue retries the run or dead-letters it."""
        self._finish("failed", error)

    def _finish(self, status: str, error: str) -> None:
        if self.id is not None:
            self.db.run(
                QUERIES["backfill_finish"],
                id=self.id,
                status=status,
                error=error,
                now=self.now(),
            )
