"""The history of finished jobs (Q2): ``ultimate_jobs_job_history``.

A finished job leaves the hot table for this one after ``HISTORY_AFTER``
(runtime/history.py moves it). The table is partitioned by the UTC day of
``finished_at`` (one partition a day, made ahead by the scheduler leader), so retention
drops whole days (retention/jobs.py). Django cannot declare a partitioned table: the
migration creates it with ``RunSQL`` and this model only reads it (``managed =
False``). Its primary key in PostgreSQL is ``(id, finished_at)`` (a partitioned
table's key holds the partition key); ``id`` alone is unique, since ids are uuid7s
made here (H5), and that is the key Django is told.

``trail`` holds what the hot table kept beside the row and deleted with it: the job's
``steps``, ``attempts`` and run ``logs``, each a list of that table's rows as JSON;
the readers turn them back into rows (sql/history.sql, history_steps and friends) and a
retry moves them back with the job (history_restore).
"""

from __future__ import annotations

from django.db import models

from ultimate_jobs.models.jobs import JobColumns, JobManager


class JobHistory(JobColumns):
    """A finished job, read from its day of history."""

    trail = models.JSONField(default=dict)
    moved_at = models.DateTimeField()

    objects = JobManager()

    class Meta(JobColumns.Meta):
        abstract = False
        managed = False
        db_table = "ultimate_jobs_job_history"
        ordering = ("-id",)
        verbose_name_plural = "job history"

    def __str__(self) -> str:
        return f"{self.name} {self.id} ({self.state}, history)"
