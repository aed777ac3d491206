"""The tables: jobs (dead letters included, as state "dead"), paused queues, workers.

The hot statements that write these tables are the named SQL in ``sql/``; the models own
the schema (through ordinary migrations) and the read QuerySets the admin and the
operator API use. ``db_table`` names are explicit because the .sql files name them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Now

from ultimate_jobs.ids import uuid7


class JobState(models.TextChoices):
    """Where a job is in its life; SQL uses these literals verbatim."""

    READY = "ready"  # due now, waiting for a worker
    DELAYED = "delayed"  # waiting for run_at (a delayed enqueue or a retry backing off)
    RUNNING = "running"  # claimed by a worker whose lease has not lapsed
    SUSPENDED = "suspended"  # parked by run.sleep / run.wait_for_event until run_at
    DONE = "done"  # completed
    FAILED = "failed"  # failed for good outside the dead-letter queue (dead_letter=False, refused)
    DEAD = "dead"  # dead-lettered: terminal error or attempts exhausted; requeueable
    CANCELLED = "cancelled"  # cancelled by an operator


LIVE_STATES = (JobState.READY, JobState.DELAYED, JobState.RUNNING, JobState.SUSPENDED)
FINISHED_STATES = (JobState.DONE, JobState.FAILED, JobState.DEAD, JobState.CANCELLED)


class Job(models.Model):
    """One job: its input, where it is, and how its last attempt ended."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run_id = models.UUIDField(default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=63, default="default")
    priority = models.SmallIntegerField(default=0)
    state = models.CharField(
        max_length=16, choices=JobState.choices, default=JobState.READY
    )
    input = models.JSONField(default=dict)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is NO_TENANT
    idempotency_key = models.CharField(max_length=512)
    attempt = models.IntegerField(default=0)
    max_attempts = models.IntegerField(default=1)
    run_at = models.DateTimeField(db_default=Now())
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=200, blank=True, db_default="")
    last_error = models.TextField(blank=True, db_default="")
    error_code = models.CharField(max_length=64, blank=True, db_default="")
    stop_reason = models.CharField(max_length=32, blank=True, db_default="")
    progress = models.JSONField(null=True, blank=True)
    correlation_id = models.CharField(max_length=255, blank=True, db_default="")
    enqueued_by = models.CharField(max_length=255, blank=True, db_default="")

    class Meta:
        db_table = "ultimate_jobs_job"
        ordering = ("-id",)
        constraints = (
            # J2: one LIVE job per (name, tenant, key); a finished job releases its key.
            models.UniqueConstraint(
                F("name"),
                Coalesce("tenant_id", Value("")),
                F("idempotency_key"),
                condition=Q(state__in=LIVE_STATES),
                name="ultimate_jobs_job_live_key",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="ultimate_jobs_job_priority_range",
            ),
        )
        indexes = (
            # W2: the claim reads due rows per queue in priority order.
            models.Index(
                F("queue"),
                F("priority").desc(),
                F("run_at"),
                F("id"),
                name="ultimate_jobs_job_ready",
                condition=Q(state=JobState.READY),
            ),
            # W2: delayed and suspended rows wake when run_at passes.
            models.Index(
                fields=("queue", "run_at"),
                name="ultimate_jobs_job_waiting",
                condition=Q(state__in=(JobState.DELAYED, JobState.SUSPENDED)),
            ),
            # W5: running rows whose lease lapsed are claimable again.
            models.Index(
                fields=("lease_expires_at",),
                name="ultimate_jobs_job_leased",
                condition=Q(state=JobState.RUNNING),
            ),
            # Operator lists and retention: by state and age, by name.
            models.Index(
                fields=("state", "finished_at"), name="ultimate_jobs_job_state_age"
            ),
            models.Index(fields=("name", "state"), name="ultimate_jobs_job_name_state"),
            models.Index(fields=("tenant_id",), name="ultimate_jobs_job_tenant"),
        )

    def __str__(self) -> str:
        return f"{self.name} {self.id} ({self.state})"


class QueuePause(models.Model):
    """A paused queue: a row the claim reads (L4); enqueues still land."""

    queue = models.CharField(max_length=63, primary_key=True)
    paused_at = models.DateTimeField(db_default=Now())
    paused_by = models.CharField(max_length=255, blank=True, db_default="")

    class Meta:
        db_table = "ultimate_jobs_queue_pause"

    def __str__(self) -> str:
        return f"{self.queue} (paused)"


class Worker(models.Model):
    """A live worker process (W8); the row expires one lease after its last heartbeat."""

    id = models.CharField(max_length=200, primary_key=True)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    queues = models.JSONField(default=list)  # the queue names it serves
    slots = models.IntegerField()
    in_flight = models.JSONField(default=list)  # ids of the jobs it runs, at most 100
    heartbeat_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_worker"
        ordering = ("id",)

    def __str__(self) -> str:
        return self.id


class OutboxMessage(models.Model):
    """A job staged in the caller's transaction, waiting for the relay (O1-O5).

    The row's id IS the job's id and ``run_id`` its run id: both are allocated at
    staging, so the enqueue answers them before the commit. The relay claims committed
    rows in ``(staged_at, id)`` order with a lease (``claimed_at``, ``claimed_by``),
    publishes each under its own id and stamps ``published_at``; published rows are
    kept as the audit trail.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run_id = models.UUIDField(default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=63, default="default")
    priority = models.SmallIntegerField(default=0)
    input = models.JSONField(default=dict)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is NO_TENANT
    idempotency_key = models.CharField(max_length=512)
    max_attempts = models.IntegerField(default=1)
    run_at = (
        models.DateTimeField()
    )  # resolved at staging: delays count from the enqueue
    correlation_id = models.CharField(max_length=255, blank=True, db_default="")
    enqueued_by = models.CharField(max_length=255, blank=True, db_default="")
    staged_at = models.DateTimeField(db_default=Now())
    staged_tx = models.BigIntegerField()  # the staging transaction (pg_current_xact_id)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is unclaimed
    claims = models.IntegerField(db_default=0)  # how many times a relay claimed it
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_outbox"
        ordering = ("staged_at", "id")
        indexes = (
            # O2/O3: the relay claims pending rows in (staged_at, id) order.
            models.Index(
                fields=("staged_at", "id"),
                name="ultimate_jobs_outbox_due",
                condition=Q(published_at__isnull=True),
            ),
            # O3: a row waits for the earlier pending rows of its own transaction.
            models.Index(
                fields=("staged_tx", "staged_at", "id"),
                name="ultimate_jobs_outbox_tx",
                condition=Q(published_at__isnull=True),
            ),
        )

    def __str__(self) -> str:
        state = "published" if self.published_at else "staged"
        return f"{self.name} {self.id} ({state})"
