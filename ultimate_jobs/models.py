"""The tables: jobs (dead letters included, as state "dead"), paused queues, workers,
concurrency leases, and the scheduler's: its leader lease, task watermarks and runtime
schedules.

The hot statements that write these tables are the named SQL in ``sql/``; the models own
the schema (through ordinary migrations) and the read QuerySets the admin and the
operator API use. ``db_table`` names are explicit because the .sql files name them.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Now
from django.db.models.signals import post_delete
from django.dispatch import receiver

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
    # The return value, kept only for django.tasks (X2); job bodies' results are not stored.
    result = models.JSONField(null=True, blank=True)
    correlation_id = models.CharField(max_length=255, blank=True, db_default="")
    enqueued_by = models.CharField(max_length=255, blank=True, db_default="")
    # L2: the lease key of a keyed concurrency limit, computed from the input at enqueue
    # (``job-key:<encoded name>:<key>``), so the claim decides in SQL. NULL: no key.
    concurrency_key = models.CharField(max_length=1000, null=True, blank=True)  # noqa: DJ001

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
            # F6: retention reads each (name, final state) by age; also serves the
            # lists by name, and the purge's loose scan over the names.
            models.Index(
                fields=("name", "state", "finished_at"),
                name="ultimate_jobs_job_name_age",
            ),
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


class StepKind(models.TextChoices):
    """What a step row records (S1-S4, S9)."""

    STEP = "step"  # run.step: a result computed once
    ATOMIC = "atomic"  # run.atomic_step: a result committed with its writes
    SLEEP = "sleep"  # run.sleep: wake_at is the wake time
    EVENT = "event"  # run.wait_for_event: wake_at is the timeout deadline (or NULL)


class StepStatus(models.TextChoices):
    """Where a step is; SQL uses these literals verbatim."""

    DONE = "done"  # finished: output holds its result
    WAITING = "waiting"  # a sleep or a wait that has not ended yet
    TIMED_OUT = "timed_out"  # a wait whose timeout passed with no matching event


class JobStep(models.Model):
    """One completed (or waiting) step of a job: the replay key is (job, name) (S1, S2).

    Rows of earlier stages of a rescheduled job are kept ``archived`` (S5): they no
    longer replay, but the events they consumed stay consumed. Deleting a job deletes
    its steps (an ON DELETE CASCADE constraint added by the migration, S8).
    """

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        Job, on_delete=models.DO_NOTHING, db_constraint=False, related_name="steps"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=StepKind.choices)
    status = models.CharField(max_length=16, choices=StepStatus.choices)
    output = models.JSONField(null=True, blank=True)
    attempt = models.IntegerField(default=0)  # the attempt that recorded it
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    event = models.CharField(max_length=200, blank=True, db_default="")
    match = models.JSONField(null=True, blank=True)
    event_id = models.BigIntegerField(null=True, blank=True)  # the event it consumed
    woken = models.BooleanField(db_default=False)  # a matching event was published
    archived = models.BooleanField(db_default=False)

    class Meta:
        db_table = "ultimate_jobs_step"
        ordering = ("id",)
        constraints = (
            # S2: one current step per (job, name); archived stages do not count.
            models.UniqueConstraint(
                fields=("job", "name"),
                condition=Q(archived=False),
                name="ultimate_jobs_step_name",
            ),
        )
        indexes = (
            # S4: a publication finds the waits on its event.
            models.Index(
                fields=("event",),
                name="ultimate_jobs_step_waiting",
                condition=Q(status=StepStatus.WAITING, kind=StepKind.EVENT),
            ),
        )

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Event(models.Model):
    """A published event (S4), matchable by waits until it expires."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is no tenant
    published_at = models.DateTimeField(db_default=Now())  # the database's clock
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_event"
        ordering = ("id",)
        indexes = (
            models.Index(
                fields=("name", "published_at"), name="ultimate_jobs_event_name"
            ),
            models.Index(fields=("expires_at",), name="ultimate_jobs_event_expiry"),
        )

    def __str__(self) -> str:
        return f"{self.name} #{self.id}"


class Lease(models.Model):
    """One held slot of a fleet-wide concurrency limit (L1, L2); see leases.py.

    ``key`` is ``job:<name>`` for ``concurrency=N`` and ``job-key:<encoded name>:<key>``
    for ``Concurrency(key=...)``; slots are numbered 0 to limit - 1. ``holder`` is the
    claim token (``Job.lease_owner``) of the run holding the slot: the slot is held
    while that run is running under that token and the lease has not lapsed.
    """

    id = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=1000)
    slot = models.IntegerField()
    name = models.CharField(max_length=200)  # the job name, for the claim's caps
    holder = models.UUIDField()
    job_id = models.UUIDField()
    # The holder this slot was taken over from (a lapsed or settled run), if any.
    taken_from = models.UUIDField(null=True, blank=True)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_lease"
        ordering = ("key", "slot")
        constraints = (
            models.UniqueConstraint(
                fields=("key", "slot"), name="ultimate_jobs_lease_slot"
            ),
        )
        indexes = (
            models.Index(fields=("holder",), name="ultimate_jobs_lease_holder"),
            models.Index(fields=("name",), name="ultimate_jobs_lease_name"),
            models.Index(fields=("expires_at",), name="ultimate_jobs_lease_expiry"),
        )

    def __str__(self) -> str:
        return f"{self.key}#{self.slot}"


class CatchUp(models.TextChoices):
    """What a task or schedule fires after downtime (C5)."""

    SKIP = "skip"  # the latest missed occurrence only
    RUN_ONCE = "run-once"  # the earliest missed occurrence, once
    RUN_ALL = "run-all"  # every missed occurrence, at most max_catch_up per tick


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
    scheduler, which uses the new row from its next tick.
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

    def save(self, *args: Any, **kwargs: Any) -> None:
        from ultimate_jobs.schedules import check_schedule, schedules_changed

        check_schedule(self)
        super().save(*args, **kwargs)
        schedules_changed(self._state.db or "default")

    def clean(self) -> None:
        from ultimate_jobs.schedules import schedule_errors

        schedule_errors(self)

    @property
    def watermark_key(self) -> str:
        return f"schedule:{self.key}"


@receiver(post_delete, sender=Schedule)
def _forget_schedule(sender: type[Schedule], instance: Schedule, **kwargs: Any) -> None:
    # A receiver, not delete(): the admin's bulk delete does not call Model.delete().
    from ultimate_jobs.schedules import schedules_changed

    using = str(kwargs.get("using") or instance._state.db or "default")
    TaskWatermark.objects.using(using).filter(key=instance.watermark_key).delete()
    schedules_changed(using)


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
    concurrency_key = models.CharField(max_length=1000, null=True, blank=True)  # noqa: DJ001 - NULL is no keyed limit
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
            # O5: the purge deletes published rows by age.
            models.Index(
                fields=("published_at",),
                name="ultimate_jobs_outbox_published",
                condition=Q(published_at__isnull=False),
            ),
        )

    def __str__(self) -> str:
        state = "published" if self.published_at else "staged"
        return f"{self.name} {self.id} ({state})"


class CounterTier(models.IntegerChoices):
    """How wide a counter bucket is (P5): 1-minute buckets for 24 h, 5-minute for 7 days,
    1-hour for 30 days; the scheduler leader folds each tier into the next."""

    MINUTE = 60
    FIVE_MINUTES = 300
    HOUR = 3600


class JobCounter(models.Model):
    """What one job's attempts did in one time bucket (P5).

    Moved in the very statement that settles each row, so the counts never disagree
    with the rows: ``done`` (completed), ``retried``, ``failed`` (dropped or refused),
    ``dead`` (dead-lettered); ``duration`` sums the attempts' seconds.
    """

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    tier = models.IntegerField(choices=CounterTier.choices)
    bucket = models.DateTimeField()
    done = models.BigIntegerField(db_default=0)
    retried = models.BigIntegerField(db_default=0)
    failed = models.BigIntegerField(db_default=0)
    dead = models.BigIntegerField(db_default=0)
    duration = models.FloatField(db_default=0.0)  # seconds, summed over the attempts

    class Meta:
        db_table = "ultimate_jobs_counter"
        ordering = ("-bucket", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("name", "tier", "bucket"), name="ultimate_jobs_counter_bucket"
            ),
        )
        indexes = (
            models.Index(fields=("tier", "bucket"), name="ultimate_jobs_counter_age"),
        )

    def __str__(self) -> str:
        return f"{self.name} @ {self.bucket:%Y-%m-%d %H:%M} ({self.tier}s)"


# The tables of the webhook ledger (F5) and the backfill ledger (F1) live in their own
# modules; imported here so Django registers them with this app.
from ultimate_jobs.backfill_models import (  # noqa: E402
    BackfillLedger as BackfillLedger,
)
from ultimate_jobs.backfill_models import (  # noqa: E402
    BackfillStatus as BackfillStatus,
)
from ultimate_jobs.webhook_models import (  # noqa: E402
    WebhookDelivery as WebhookDelivery,
)
from ultimate_jobs.webhook_models import (  # noqa: E402
    WebhookEndpointState as WebhookEndpointState,
)
