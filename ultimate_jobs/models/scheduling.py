"""The scheduler's tables (C3-C7): its leader lease, task watermarks and runtime
schedules. Saving a schedule is checked and announced by
ultimate_jobs.scheduling.schedules (its model signal receivers)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from ultimate_jobs.declaration.states import CatchUp


class LeaderLease(models.Model):
    """Who leads a fleet-wide role (the scheduler, C3): a row with an expiry, never a
    session advisory lock, so it needs no connection affinity and survives a pool."""

    role = models.CharField(max_length=63, primary_key=True)
    holder = models.CharField(max_length=200)  # host:pid:random of the leading process
    term = models.BigIntegerField(default=1)  # +1 each time the lease changes hands
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_leader_lease"

    def __str__(self) -> str:
        return f"{self.role}: {self.holder}"


class TaskWatermark(models.Model):
    """The durable progress of one task or schedule (C4): every occurrence at or before
    ``last_occurrence`` is done (fired, or passed over by the catch-up policy)."""

    key = models.CharField(
        max_length=255, primary_key=True
    )  # task:<name>, schedule:<key>
    kind = models.CharField(max_length=16)  # "task" or "schedule"
    name = models.CharField(max_length=200)
    spec = models.CharField(max_length=300, blank=True, db_default="")  # "<cron> <tz>"
    last_occurrence = models.DateTimeField()
    last_fired_occurrence = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    fires = models.BigIntegerField(db_default=0)
    paused = models.BooleanField(db_default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=255, blank=True, db_default="")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ultimate_jobs_task_watermark"
        ordering = ("key",)
        verbose_name = "task fire"

    def __str__(self) -> str:
        return self.key


class Schedule(models.Model):
    """A runtime schedule (C6): put ``job`` with ``input`` on the queue on ``cron``.

    One row per key; ``recur`` with the same key replaces it. Saving checks the row with
    the errors ``@task`` raises (InvalidCron, InvalidTimezone, ...) and tells the
    scheduler, which uses the new row from its next tick (the receivers in
    ultimate_jobs.scheduling.schedules).
    """

    key = models.CharField(max_length=200, unique=True)
    job = models.CharField(max_length=200, help_text="the name of a registered job")
    input = models.JSONField(default=dict, blank=True)
    cron = models.CharField(max_length=200, help_text="5 fields, e.g. */5 * * * *")
    tz = models.CharField(
        "time zone", max_length=64, help_text="an IANA name, e.g. Europe/Paris"
    )
    catch_up = models.CharField(
        max_length=16, choices=CatchUp.choices, default=CatchUp.SKIP
    )
    max_catch_up = models.PositiveIntegerField(default=10)
    description = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ultimate_jobs_schedule"
        ordering = ("key",)

    def __str__(self) -> str:
        return self.key

    @property
    def watermark_key(self) -> str:
        return f"schedule:{self.key}"
