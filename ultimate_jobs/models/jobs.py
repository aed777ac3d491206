"""The job tables: jobs (dead letters included, as state "dead"), their steps, events,
paused queues, workers, concurrency leases and per-job counters.

The hot statements that write these tables are the named SQL in ``sql/``; the models own
the schema (through ordinary migrations) and the read QuerySets the admin and the
operator API use. ``db_table`` names are explicit because the .sql files name them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Now

from ultimate_jobs.declaration.states import (
    FINISHED_STATES,
    LIVE_STATES,
    JobState,
    StepKind,
    StepStatus,
)
from ultimate_jobs.ground.ids import uuid7
from ultimate_jobs.models.readable import ReadableQuerySet

JobManager = models.Manager.from_queryset(ReadableQuerySet)

# The rows that carry a correlation id: the condition of its index, which a reader by
# prefix must also name (``fired_by``).
CORRELATED = ~Q(correlation_id="")


def fired_by(prefix: str) -> Q:
    """The jobs whose correlation id starts with ``prefix`` (C7), in a form the
    correlation index serves: a non-empty ``prefix`` implies a non-empty id, but
    PostgreSQL proves a partial index's condition only from a clause it sees."""
    return CORRELATED & Q(correlation_id__startswith=prefix)


class JobColumns(models.Model):
    """The columns of a job row, shared by the hot table and its archive (Q2)."""

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
    # S10: the job whose run.spawn enqueued this one (NULL: none). Not a foreign key:
    # the parent may have moved to the finished jobs table, or live on another alias.
    parent_id = models.UUIDField(null=True, blank=True)
    # B5: what operators may not see, decided at enqueue and kept with the row, so a
    # process that does not declare the job still hides it. ``redact``: the input paths
    # the job declared (NULL: none); ``shown_key``: the idempotency key with its hidden
    # values replaced (NULL: the key holds none, it is shown as it is).
    redact = models.JSONField(null=True, blank=True)
    shown_key = models.CharField(max_length=512, null=True, blank=True)  # noqa: DJ001
    # P10: the fingerprint of the last failed attempt's error (observability/triage.py),
    # written by the database (a trigger on the hot table, copied by the archive move).
    fingerprint = models.CharField(max_length=16, null=True, blank=True, editable=False)  # noqa: DJ001

    class Meta:
        abstract = True


class Job(JobColumns):
    """One job: its input, where it is, and how its last attempt ended."""

    # Lists and reads skip (and name) a row Python cannot read (B4, models/readable.py).
    objects = JobManager()

    class Meta(JobColumns.Meta):
        abstract = False
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
            # Retention, the archive's mover and clock, triage and the operator lists
            # of one finished state, by age. Finished rows only (issue 26): a live
            # state's rows are found through the ready, waiting and leased indexes, so
            # an enqueue does not enter this one.
            models.Index(
                fields=("state", "finished_at"),
                name="ultimate_jobs_job_state_age",
                condition=Q(state__in=FINISHED_STATES),
            ),
            # F6: retention reads each (name, final state) by age; also serves the
            # lists by name, and the purge's loose scan over the names.
            models.Index(
                fields=("name", "state", "finished_at"),
                name="ultimate_jobs_job_name_age",
            ),
            # The lists and verbs of one tenant: every reader names a tenant, so the
            # rows of no tenant (NULL) stay out (issue 26: most enqueues skip it).
            models.Index(
                fields=("tenant_id",),
                name="ultimate_jobs_job_tenant",
                condition=Q(tenant_id__isnull=False),
            ),
            # P1: the admin's search finds keys by prefix (``?q=report:42``) on a
            # million-row table; the pattern opclass serves LIKE 'prefix%' and =.
            models.Index(
                fields=("idempotency_key",),
                name="ultimate_jobs_job_key",
                opclasses=("varchar_pattern_ops",),
            ),
            # S10, S11: a parent's children, newest first (keyset pages, counts by
            # state), and whether a parent still has a live child (the fan-in's wake).
            models.Index(
                fields=("parent_id", "id"),
                name="ultimate_jobs_job_children",
                condition=Q(parent_id__isnull=False),
            ),
            models.Index(
                fields=("parent_id", "id"),
                name="ultimate_jobs_job_live_kids",
                condition=Q(parent_id__isnull=False, state__in=LIVE_STATES),
            ),
            # B5: the admin's search matches a key holding a hidden value by its
            # shown form only (few rows: NULL for every key that holds none).
            models.Index(
                fields=("shown_key",),
                name="ultimate_jobs_job_shown_key",
                opclasses=("varchar_pattern_ops",),
                condition=Q(shown_key__isnull=False),
            ),
            # C7, issue 15: the jobs a task fired, by their correlation id's prefix.
            # Only rows that carry one (issue 26): a reader adds the index's condition
            # (``fired_by``), since PostgreSQL cannot infer it from the LIKE.
            models.Index(
                fields=("correlation_id",),
                name="ultimate_jobs_job_correlation",
                opclasses=("varchar_pattern_ops",),
                condition=CORRELATED,
            ),
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
    # The job names its code declares, the only ones it claims (issue 30); written when
    # it registers. NULL: not recorded (an earlier version, or past heartbeat.MAX_NAMES).
    names = models.JSONField(null=True, blank=True)
    slots = models.IntegerField()
    in_flight = models.JSONField(default=list)  # ids of the jobs it runs, at most 100
    # Slots held by bodies that ran past their timeout and ignore their cancel token
    # (S6): lost capacity until they return; their job ids, at most 100.
    abandoned = models.IntegerField(db_default=0)
    abandoned_jobs = models.JSONField(db_default=[], default=list)
    heartbeat_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    # An operator asked this worker to drain (issue 15): it stops claiming at its next
    # heartbeat, finishes what it runs, and exits. Who asked, for the admin.
    drain_requested_at = models.DateTimeField(null=True, blank=True)
    drain_requested_by = models.CharField(max_length=255, blank=True, db_default="")

    class Meta:
        db_table = "ultimate_jobs_worker"
        ordering = ("id",)

    def __str__(self) -> str:
        return self.id


class JobAction(models.Model):
    """Who did what to a job from an operator surface (P2): cancel, retry, remove,
    promote. Kept apart from the job row, so a removed job's removal stays recorded;
    ``actor_id`` and ``actor_name`` are the admin user's id and display name, or the
    command line's ``--actor`` (default: the OS user)."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.UUIDField()
    job_name = models.CharField(max_length=200, blank=True, db_default="")
    action = models.CharField(max_length=16)  # cancel | retry | remove | promote
    actor_id = models.CharField(max_length=255, blank=True, db_default="")
    actor_name = models.CharField(max_length=255, blank=True, db_default="")
    source = models.CharField(
        max_length=16, blank=True, db_default=""
    )  # admin | cli | api
    reason = models.CharField(max_length=1000, blank=True, db_default="")
    at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ultimate_jobs_job_action"
        ordering = ("id",)
        indexes = (
            models.Index(fields=("job_id", "id"), name="ultimate_jobs_action_job"),
        )

    def __str__(self) -> str:
        return f"{self.action} {self.job_id} by {self.actor_name or self.actor_id}"


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
