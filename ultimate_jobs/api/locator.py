"""Where a job is (Q1, Q2, O1): the one locator every front door finds a job with.

A job lives on one alias (its queue's route, Q1) and there in exactly one of three
places: the hot table, the archive of finished jobs (Q2: the leader moved it), or the
outbox, staged by a committed transaction the relay has not published yet (O1). Ids
are uuid7s made here (H5), unique across aliases and tables.

* ``find(job_id)`` answers the job and its ``Place`` (alias and table), or None;
  ``where(job_id)`` the place only;
* ``alias_of(job_id)`` the alias a verb acts on: the one that holds the job, else
  DATABASE (where the verb's statement then moves nothing and the refusal says why);
* ``load(job_id)`` the job as a ``Job`` from its hot table or its archive (a row of
  the archive answered with its steps, attempts and logs from ``trail``), else
  JobNotFound.

A row Python cannot read (B4) is RowUnreadable wherever it is read.

The aliases looked at are ``get_settings().aliases``: DATABASE first, then the routed
ones (inside ``jobs --database``, the chosen one first).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from django.db.models import Model, QuerySet

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.exceptions import JobNotFound, RowUnreadable
from ultimate_jobs.models import Job, JobArchive, OutboxMessage
from ultimate_jobs.models.archive import as_job
from ultimate_jobs.observability import metrics

RowT = TypeVar("RowT", bound=Model)


class Table(enum.StrEnum):
    """Which of an alias's tables holds a job."""

    HOT = "job"  # ultimate_jobs_job: live, or finished less than ARCHIVE_AFTER ago
    ARCHIVE = "archive"  # ultimate_jobs_job_archive (Q2)
    OUTBOX = "outbox"  # staged, not yet published (O1)


@dataclass(frozen=True, slots=True)
class Place:
    """Where one job is: the alias and the table."""

    alias: str
    table: Table


@dataclass(frozen=True, slots=True)
class Found:
    """A job and where it was found: ``job`` for the hot table and the archive (a row
    of the archive answered as a Job), ``staged`` for the outbox."""

    place: Place
    job: Job | None = None
    staged: OutboxMessage | None = None


def _aliases(alias: str | None) -> Sequence[str]:
    return (alias,) if alias is not None else get_settings().aliases


def _stored(job_id: uuid.UUID, aliases: Sequence[str]) -> Found | None:
    """The job from the hot table, else the archive, of the first of ``aliases`` that
    holds it: one read per table looked at."""
    for alias in aliases:
        hot = _first(Job.objects.using(alias).filter(pk=job_id), job_id)
        if hot is not None:
            return Found(Place(alias, Table.HOT), job=hot)
        moved = _first(JobArchive.objects.using(alias).filter(pk=job_id), job_id)
        if moved is not None:
            return Found(Place(alias, Table.ARCHIVE), job=as_job(moved))
    return None


def find(job_id: uuid.UUID, *, alias: str | None = None) -> Found | None:
    """The job of ``job_id`` and its place, on ``alias`` or on any alias; None when
    nowhere (never enqueued, rolled back, or purged). A job on the first alias in
    the hot table is one query. An outbox row the relay published between the reads
    sends the search back to the tables it published into."""
    aliases = _aliases(alias)
    if (found := _stored(job_id, aliases)) is not None:
        return found
    for source in aliases:
        staged = OutboxMessage.objects.using(source).filter(pk=job_id).first()
        if staged is None:
            continue
        if staged.published_at is None:
            return Found(Place(source, Table.OUTBOX), staged=staged)
        return _stored(job_id, aliases)  # relayed since the first read
    return None


def where(job_id: uuid.UUID, *, alias: str | None = None) -> Place | None:
    """The place of ``job_id`` (see ``find``), or None."""
    found = find(job_id, alias=alias)
    return None if found is None else found.place


def alias_of(job_id: uuid.UUID) -> str:
    """The alias whose tables hold the job (Q1), else DATABASE. With one alias, no
    query: the verb's own statement tells."""
    aliases = get_settings().aliases
    for alias in aliases[1:]:
        if (
            Job.objects.using(alias).filter(pk=job_id).exists()
            or JobArchive.objects.using(alias).filter(pk=job_id).exists()
        ):
            return alias
    return aliases[0]


def load(job_id: uuid.UUID, *, alias: str | None = None) -> Job:
    """The job of ``job_id`` from its hot table, else its archive, on ``alias`` or on
    any alias; JobNotFound when in neither (a staged job is not a job yet)."""
    found = _stored(job_id, _aliases(alias))
    if found is None or found.job is None:
        raise JobNotFound(job_id)
    return found.job


def _first(rows: QuerySet[RowT], job_id: uuid.UUID) -> RowT | None:
    """The one row of ``rows``, None when there is none; RowUnreadable when the row
    is there but Python cannot read it (B4)."""
    found = rows[:1]
    read = list(found)
    if read:
        return read[0]
    if skipped := getattr(found, "unreadable", None):
        metrics.row_unreadable("job")
        raise RowUnreadable(rows.model._meta.db_table, job_id, skipped[0][1])
    return None
