"""The operator's verbs over backfills (F2): where each declared backfill stands, what a
dry run would do, putting a pass on the queue, and waiting for it to end.

``manage.py db_backfill`` is a thin front-end over this module; ``pending_backfills()``
is the same answer for a deploy check written in Python. Every answer reads the ledger
through its one projection (backfill_ledger.read).

Where a declared backfill stands (``BackfillState.state``):

========== ======================================================== ==============
state      means                                                    pending?
========== ======================================================== ==============
pending    declared, and no pass has started: no ledger row, or a   yes
           queued one no worker has begun
failed     its newest pass failed: retried by the queue, or dead    yes
running    a pass is in flight                                      no
done       its newest pass completed; nothing re-runs without force no
excluded   ``environments`` does not include this ``ENVIRONMENT``  no
========== ======================================================== ==============

A running pass is not pending: a deploy check that stays red for the whole of every
sweep is a check that gets muted.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ultimate_jobs.backfills import ledger as backfill_ledger
from ultimate_jobs.backfills.ledger import LedgerRow
from ultimate_jobs.backfills.sweep import Backfill, get_backfill, registered_backfills
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.ground.exceptions import (
    BackfillExcluded,
    JobNotFound,
    JobsError,
    UnknownBackfill,
)
from ultimate_jobs.sql import QUERIES

PENDING_STATES = ("pending", "failed")


@dataclass(frozen=True, slots=True)
class BackfillState:
    """Where one declared backfill stands, from its newest ledger row."""

    name: str
    state: str  # pending, failed, running, done, excluded
    checksum: str  # the declaration's, now
    last: LedgerRow | None  # its newest pass, if any

    @property
    def checksum_changed(self) -> bool:
        """The newest pass ran under another definition (reported, never acted on)."""
        return self.last is not None and self.last.checksum != self.checksum

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "checksum": self.checksum,
            "checksum_changed": self.checksum_changed,
            "last": None if self.last is None else self.last.as_json(),
        }


def _state(body: Backfill, last: LedgerRow | None, environment: str) -> str:
    try:
        body.check_environment(environment)
    except BackfillExcluded:
        return "excluded"
    return "pending" if last is None else last.status


def backfill_states(
    names: Sequence[str] | None = None, *, environment: str | None = None
) -> list[BackfillState]:
    """Where every declared backfill (or those of ``names``) stands, by name.

    ``environment`` defaults to the ``ENVIRONMENT`` setting.
    """
    environment = environment or get_settings().ENVIRONMENT
    bodies = (
        registered_backfills()
        if names is None
        else [get_backfill(name) for name in names]
    )
    newest = backfill_ledger.newest_by_name([b.name for b in bodies])
    return [
        BackfillState(
            name=b.name,
            state=_state(b, newest.get(b.name), environment),
            checksum=b.checksum,
            last=newest.get(b.name),
        )
        for b in bodies
    ]


def pending_backfills(*, environment: str | None = None) -> list[BackfillState]:
    """The declared backfills still to sweep here: pending or failed (F2)."""
    return [
        s for s in backfill_states(environment=environment) if s.state in PENDING_STATES
    ]


@dataclass(frozen=True, slots=True)
class Plan:
    """What ``db_backfill NAME`` would do: the dry run's answer."""

    name: str
    state: str
    action: str  # enqueue, skip (completed), running (joins the live pass), refuse
    reason: str
    count: int | None  # what count() answers now; None when none is declared
    batches: int | None  # the batches that count makes at least
    seconds: float | None  # the least time those batches take at the rate
    error: JobsError | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "action": self.action,
            "reason": self.reason,
            "count": self.count,
            "batches": self.batches,
            "seconds": self.seconds,
            "error": None
            if self.error is None
            else {"code": self.error.code, "message": self.error.message},
        }


def plan(name: str, *, force: bool = False) -> Plan:
    """A dry run: the gates, ``count()``, and what ``--write`` would do. Writes nothing."""
    body = get_backfill(name)
    [standing] = backfill_states([name])
    count = batches = seconds = None
    try:
        body.check_environment()
        source = body.read_source()
        body.check_requires(source.db)
        count = body.remaining()
    except JobsError as exc:
        return Plan(name, standing.state, "refuse", exc.message, None, None, None, exc)
    if count is not None:
        batches = max(math.ceil(count / body.batch), 1)
        seconds = round((batches - 1) / body.rate, 3)
    last = standing.last
    if standing.state == "done" and not force and last is not None:
        changed = (
            " (its definition has changed since)" if standing.checksum_changed else ""
        )
        reason = f"completed in pass #{last.id}{changed}; --force sweeps again"
        return Plan(name, standing.state, "skip", reason, count, batches, seconds)
    if standing.state == "running" and last is not None:
        reason = f"pass #{last.id} is running (job {last.job_id})"
        return Plan(name, standing.state, "running", reason, count, batches, seconds)
    reason = "would enqueue a new pass" + (" (forced)" if force else "")
    return Plan(name, standing.state, "enqueue", reason, count, batches, seconds)


@dataclass(frozen=True, slots=True)
class Started:
    """What ``db_backfill NAME --write`` did."""

    plan: Plan
    job_id: uuid.UUID | None  # None when it skipped a completed backfill
    deduped: bool  # a live pass already held the name: this is that pass

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "job_id": None if self.job_id is None else str(self.job_id),
            "deduped": self.deduped,
        }


def start(name: str, *, force: bool = False) -> Started:
    """Put a pass of ``name`` on the queue (never run it inline), after the gates.

    Refused with the gate's error (``BackfillExcluded``, ``BackfillMigrationPending``,
    ``BackfillInvalid``); a completed backfill is skipped unless ``force``; a live pass
    is joined (the idempotency key is the name).
    """
    planned = plan(name, force=force)
    if planned.error is not None:
        raise planned.error
    if planned.action == "skip":
        return Started(planned, None, deduped=False)
    body = get_backfill(name)  # registered_backfills() answers declared jobs only
    answer = body.job.enqueue(force=force) if body.job is not None else None
    if answer is None:
        raise UnknownBackfill(name, [b.name for b in registered_backfills()])
    if not answer.deduped:
        backfill_ledger.record_enqueued(
            name=name, checksum=body.checksum, job_id=answer.id, forced=force
        )
    return Started(planned, answer.id, answer.deduped)


@dataclass(frozen=True, slots=True)
class Progress:
    """One look at a queued pass: its job's state and its ledger's counts."""

    state: str  # the job's
    finished: bool  # done, failed, dead or cancelled: the pass has ended
    attempt: int
    max_attempts: int
    rows: int
    batches: int
    error: str  # the last failed attempt's, first line

    @property
    def succeeded(self) -> bool:
        return self.state == "done"


def pause_between_polls(seconds: float) -> None:
    """How ``watch`` waits between two looks (a seam for tests)."""
    time.sleep(seconds)


def watch(
    job_id: uuid.UUID,
    *,
    report: Callable[[Progress], None],
    interval: float = 0.5,
) -> Progress:
    """Look at the pass every ``interval`` seconds, telling ``report``, until its job
    is finished; answer the last look."""
    db = DjangoDatabase(get_settings().DATABASE)
    while True:
        rows = db.run(QUERIES["backfill_watch"], job_id=job_id)
        if not rows:
            raise JobNotFound(job_id)
        row = rows[0]
        error = (row["last_error"] or "").partition("\n")[0]  # class: message
        seen = Progress(
            state=row["state"],
            finished=row["finished"],
            attempt=row["attempt"],
            max_attempts=row["max_attempts"],
            rows=row["rows"] or 0,
            batches=row["batches"] or 0,
            error=error,
        )
        report(seen)
        if seen.finished:
            return seen
        pause_between_polls(interval)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One name of ``db_backfill --all``: what it did, or the error that stopped it."""

    name: str
    started: Started | None = None
    planned: Plan | None = None
    error: JobsError | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def as_json(self) -> dict[str, Any]:
        if self.error is not None:
            error = {"code": self.error.code, "message": self.error.message}
            return {"name": self.name, "error": error}
        done = self.started or self.planned
        return done.as_json() if done is not None else {"name": self.name}


def each(names: Sequence[str], *, write: bool, force: bool = False) -> list[Outcome]:
    """``--all``: plan (or, with ``write``, start) every name, each isolated: one
    refused does not stop the next. An excluded backfill is skipped, not refused:
    ``--all --write`` runs everywhere, and each backfill says where it belongs."""
    outcomes = []
    for name in names:
        try:
            if not write:
                outcomes.append(Outcome(name, planned=plan(name, force=force)))
                continue
            outcomes.append(Outcome(name, started=start(name, force=force)))
        except BackfillExcluded as exc:
            skipped = Plan(name, "excluded", "skip", exc.message, None, None, None)
            outcomes.append(
                Outcome(name, started=Started(skipped, None, deduped=False))
            )
        except JobsError as exc:
            outcomes.append(Outcome(name, error=exc))
    return outcomes
