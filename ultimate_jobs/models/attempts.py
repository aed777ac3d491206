"""The attempt history (P6): one row per ended attempt that the job row no longer shows.

The job row holds its latest attempt (worker, started, finished, last error); a row
here is written by the statement that moves the job past an attempt without ending it
(a retry, a lapsed lease taken over by a claim, an attempt abandoned at the drain
deadline) and by the requeue that starts a new run, so a retry never erases the past.
Deleting a job deletes its attempts (an ON DELETE CASCADE constraint added by the
migration), so retention trims them with the job (F6).
"""

from __future__ import annotations

from django.db import models

from ultimate_jobs.models.jobs import Job


class Attempt(models.Model):
    """One earlier attempt of one job: who ran it, when, and how it ended."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        Job, on_delete=models.DO_NOTHING, db_constraint=False, related_name="attempts"
    )
    run_id = models.UUIDField()  # a requeue starts a new run: attempts count again
    attempt = models.IntegerField()
    worker_id = models.CharField(max_length=200, blank=True, db_default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # retried, lapsed, abandoned, rescheduled, completed, dead-lettered, dropped,
    # refused, cancelled
    outcome = models.CharField(max_length=32)
    error = models.TextField(blank=True, db_default="")  # bounded, with the traceback
    error_code = models.CharField(max_length=64, blank=True, db_default="")

    class Meta:
        db_table = "ultimate_jobs_attempt"
        ordering = ("id",)
        indexes = (
            models.Index(fields=("job", "id"), name="ultimate_jobs_attempt_job"),
        )

    def __str__(self) -> str:
        return f"{self.job_id} attempt {self.attempt} ({self.outcome})"
