"""The archive of finished jobs (Q2): ``ultimate_jobs_job_archive``.

A finished job leaves the hot table for this one after ``ARCHIVE_AFTER``
(maintenance/archive.py moves it). The table is partitioned by the UTC day of
``finished_at`` (one partition a day, made ahead by the scheduler leader), so retention
drops whole days (retention/jobs.py). Django cannot declare a partitioned table: the
migration creates it with ``RunSQL`` and this model only reads it (``managed =
False``). Its primary key in PostgreSQL is ``(id, finished_at)`` (a partitioned
table's key holds the partition key); ``id`` alone is unique, since ids are uuid7s
made here (H5), and that is the key Django is told.

``trail`` holds what the hot table kept beside the row and deleted with it: the job's
``steps``, ``attempts`` and run ``logs``, each a list of that table's rows as JSON;
the readers turn them back into rows (``as_job``) and a retry moves them back with
the job (sql/archive.sql, archive_restore).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from ultimate_jobs.models.attempts import Attempt
from ultimate_jobs.models.jobs import Job, JobColumns, JobStep
from ultimate_jobs.models.readable import ReadableQuerySet
from ultimate_jobs.models.runlogs import RunLog

ArchiveManager = models.Manager.from_queryset(ReadableQuerySet)


class JobArchive(JobColumns):
    """A finished job, read from its day of the archive."""

    trail = models.JSONField(default=dict)
    moved_at = models.DateTimeField()

    objects = ArchiveManager()

    class Meta(JobColumns.Meta):
        abstract = False
        managed = False
        db_table = "ultimate_jobs_job_archive"
        ordering = ("-id",)
        verbose_name_plural = "job archive"

    def __str__(self) -> str:
        return f"{self.name} {self.id} ({self.state}, archive)"


class ArchiveCount(models.Model):
    """How many jobs of one (queue, state) the archive gained or lost for one UTC day
    of ``finished_at`` (issue 27, Q2, P7): a count is the SUM of its rows.

    Kept by the statements that move rows in or out of the archive (sql/archive.sql:
    the move adds, a restore, a remove and the purges subtract, the day drop deletes
    the days it drops), in the same statement, so a dead job moved to the archive is
    still counted by the gauge, the dashboard and ``jobs stats`` without reading the
    archive. A statement only INSERTs its change, so two statements never wait for
    each other's count; the move folds the rows of the days it touches into one
    (skipping rows another statement holds), so a day keeps a row or two.
    """

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=63)
    state = models.CharField(max_length=16)
    day = models.DateField()
    jobs = models.BigIntegerField()

    class Meta:
        db_table = "ultimate_jobs_archive_count"
        indexes = (
            models.Index(
                fields=("state", "queue", "day"), name="ultimate_jobs_archive_count_at"
            ),
        )

    def __str__(self) -> str:
        return f"{self.queue} {self.state} {self.day}: {self.jobs:+}"


def _rows(model: type[models.Model], stored: Any) -> list[Any]:
    """The rows ``trail`` kept of one table, as unsaved instances of its model (each
    value read back by its field, the way the database would have answered it)."""
    out = []
    for item in stored if isinstance(stored, list) else []:
        values = {
            field.attname: field.to_python(item.get(field.column))
            for field in model._meta.concrete_fields
        }
        row = model(**values)
        row._state.adding = False
        out.append(row)
    return out


def _cache(job: Job, accessor: str, model: type[models.Model], rows: list[Any]) -> None:
    """What ``prefetch_related(accessor)`` leaves: ``job.<accessor>.all()`` answers
    ``rows`` without a query (the hot copies were deleted with the move)."""
    cached = model._default_manager.using(job._state.db).filter(job_id=job.id)
    cached._result_cache = rows
    cached._prefetch_done = True  # type: ignore[attr-defined]
    job._prefetched_objects_cache[accessor] = cached  # type: ignore[attr-defined]


def as_job(row: JobArchive) -> Job:
    """A job in the archive as a ``Job`` every reader of the hot table can show: the same
    columns, and its steps, attempts and run logs (``job.steps.all()``,
    ``job.attempts.all()``, ``job.logs.all()``) read from ``trail``. Never saved: a
    retry moves the row back first (sql/archive.sql, archive_restore)."""
    job = Job(
        **{
            field.attname: getattr(row, field.attname)
            for field in Job._meta.concrete_fields
        }
    )
    job._state.adding = False
    job._state.db = row._state.db
    job._prefetched_objects_cache = {}  # type: ignore[attr-defined]
    trail = row.trail if isinstance(row.trail, dict) else {}
    _cache(job, "steps", JobStep, _rows(JobStep, trail.get("steps")))
    _cache(job, "attempts", Attempt, _rows(Attempt, trail.get("attempts")))
    _cache(job, "logs", RunLog, _rows(RunLog, trail.get("logs")))
    return job
