"""The backfill ledger (F1): one row per pass of a backfill, the twin of Django's
``django_migrations`` for data.

Written by backfill_ledger.py with the named statements of sql/backfills.sql; read by
``manage.py db_backfill``, ``pending_backfills()`` and the admin. The row is a report,
never a resume source: where a resumed pass restarts is its steps' answer. Imported by
models.py, so Django sees it as this app's model.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class BackfillStatus(models.TextChoices):
    """Where one pass is; SQL uses these literals verbatim."""

    PENDING = "pending"  # enqueued by db_backfill --write; no worker has started it
    RUNNING = "running"  # a worker sweeps it (or died, and the pass will resume)
    DONE = "done"  # the source ran dry: nothing re-runs without force
    FAILED = "failed"  # its last attempt failed: retried by the queue, or dead


class BackfillLedger(models.Model):
    """One pass of one backfill: what it swept, under which definition, and how it ended."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    # sha256 of what the declaration sweeps (source, handle, count, requires,
    # environments); a moved checksum is reported, never acted on.
    checksum = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=BackfillStatus.choices, default=BackfillStatus.PENDING
    )
    app_version = models.CharField(max_length=200, blank=True, db_default="")
    job_id = models.UUIDField(null=True, blank=True)  # the run sweeping this pass
    forced = models.BooleanField(default=False)  # run again over a completed pass
    rows = models.BigIntegerField(default=0)  # rows handed to handle() so far
    batches = models.IntegerField(default=0)  # pages checkpointed so far
    last_cursor = models.JSONField(null=True, blank=True)  # the last primary key read
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)  # its first attempt
    completed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, db_default="")  # why the last attempt failed

    class Meta:
        db_table = "ultimate_jobs_backfill"
        ordering = ("-id",)
        verbose_name = "backfill pass"
        verbose_name_plural = "backfill ledger"
        constraints = (
            # A run adopts its own row on every attempt: one row per run.
            models.UniqueConstraint(
                fields=("job_id",), name="ultimate_jobs_backfill_job"
            ),
        )
        indexes = (
            models.Index(fields=("name", "-id"), name="ultimate_jobs_backfill_name"),
        )

    def __str__(self) -> str:
        return f"{self.name} #{self.pk} ({self.status})"
