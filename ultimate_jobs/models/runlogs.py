"""Per-attempt log lines (seed ``logMaxEntries``) and the manifest's admin entry (J7).

``RunLog`` is one row per attempt that logged anything through ``run.logger``: the
newest ``RUN_LOG_MAX_ENTRIES`` lines as one JSON array, written in one statement when
the attempt ends (sql/runlogs.sql). Deleting a job deletes its log rows (an ON DELETE
CASCADE constraint added by the migration), so retention trims them with the job.

``DeclaredJob`` is a proxy with no rows of its own: it gives the admin a page for the
manifest of declared jobs and tasks (admin/manifest.py).
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from ultimate_jobs.models.jobs import Job


class RunLog(models.Model):
    """What one attempt of one job wrote through ``run.logger``, bounded."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        Job, on_delete=models.DO_NOTHING, db_constraint=False, related_name="logs"
    )
    run_id = models.UUIDField()  # a requeue starts a new run: attempts count again
    attempt = models.IntegerField()
    # [{"at": ISO 8601, "level": "INFO", "message": "..."}], oldest first.
    entries = models.JSONField(default=list)
    dropped = models.IntegerField(default=0)  # older lines past the bound, not kept
    written_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ultimate_jobs_run_log"
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.job_id} attempt {self.attempt} ({len(self.entries)} lines)"


class DeclaredJob(Job):
    """The manifest's admin page: every job and task this deploy declares (J7)."""

    class Meta:
        proxy = True
        verbose_name = "declared job or task"
        verbose_name_plural = "manifest"
