"""The outbox table (O1-O5): jobs staged in the caller's transaction."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from ultimate_jobs.ground.ids import uuid7


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
    # B5: the job row's redact and shown_key, decided at staging (models/jobs.py).
    redact = models.JSONField(null=True, blank=True)
    shown_key = models.CharField(max_length=512, null=True, blank=True)  # noqa: DJ001 - NULL is the key as it is
    # S10, Q1: the job whose run.spawn staged this row for another alias; the relay
    # publishes the child there with this parent_id (NULL: not a spawned child).
    parent_id = models.UUIDField(null=True, blank=True)
    staged_at = models.DateTimeField(db_default=Now())
    staged_tx = models.BigIntegerField()  # the staging transaction (pg_current_xact_id)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is unclaimed
    claims = models.IntegerField(db_default=0)  # how many times a relay claimed it
    published_at = models.DateTimeField(null=True, blank=True)
    # Set, with published_at, when a relay could not read the row (B4: a timestamp
    # past year 9999 written by hand): the row is retired unpublished, and why is here.
    error = models.TextField(blank=True, db_default="")

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


class OutboxReceipt(models.Model):
    """Q1: an outbox row a relay delivered into this alias from another one.

    The id is the staged row's id (the job's own): the relay writes the receipt and the
    job in one statement, so a relay killed after that statement and before it marked
    the source row delivers nothing twice. The receipt outlives the job row, so even a
    job already finished and purged is not published again.
    """

    id = models.UUIDField(primary_key=True, editable=False)
    received_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ultimate_jobs_outbox_receipt"
        indexes = (
            # The purge deletes receipts by age, with the published outbox rows.
            models.Index(
                fields=("received_at",), name="ultimate_jobs_receipt_received"
            ),
        )

    def __str__(self) -> str:
        return f"received {self.id}"
