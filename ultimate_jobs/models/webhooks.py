"""The tables of the database webhook ledger (F5): one row per delivery attempt, and one
row per endpoint with its consecutive failures and its disabled verdict.

They belong to ``DatabaseWebhookLedger`` (webhook_ledger.py), which writes them with the
named statements of sql/webhooks.sql. An app with other retention or audit rules
implements the ``WebhookLedger`` protocol over its own tables instead. Imported by
models.py, so Django sees them as this app's models.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class WebhookDelivery(models.Model):
    """One delivery attempt, written before the attempt's outcome (F5).

    Never the endpoint's URL, headers or secret: the endpoint id names it.
    """

    id = models.BigAutoField(primary_key=True)
    endpoint_id = models.CharField(max_length=200)
    event_id = models.CharField(max_length=200)
    topic = models.CharField(max_length=200)
    job_id = models.UUIDField(null=True, blank=True)
    attempt = models.IntegerField(default=0)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL is NO_TENANT
    ok = models.BooleanField()
    status = models.IntegerField(null=True, blank=True)  # NULL: no HTTP answer
    error = models.CharField(max_length=500, blank=True, db_default="")
    retry_after = models.FloatField(null=True, blank=True)  # seconds the receiver named
    duration = models.FloatField(default=0.0)  # seconds on the wire
    attempted_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ultimate_jobs_webhook_delivery"
        ordering = ("-id",)
        verbose_name_plural = "webhook deliveries"
        indexes = (
            models.Index(fields=("endpoint_id", "id"), name="ultimate_jobs_webhook_ep"),
            models.Index(fields=("attempted_at",), name="ultimate_jobs_webhook_at"),
        )

    def __str__(self) -> str:
        outcome = "ok" if self.ok else "failed"
        return f"{self.endpoint_id} {self.event_id} {outcome} ({self.status})"


class WebhookEndpointState(models.Model):
    """What the ledger knows of one endpoint: its failure streak, and whether it is
    disabled. Only a person (``ledger.enable`` or the admin action) clears
    ``disabled_at``; a success resets the streak and nothing else."""

    endpoint_id = models.CharField(max_length=200, primary_key=True)
    consecutive_failures = models.IntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=500, blank=True, db_default="")
    enabled_at = models.DateTimeField(null=True, blank=True)
    enabled_by = models.CharField(max_length=255, blank=True, db_default="")
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_webhook_endpoint"
        ordering = ("endpoint_id",)

    def __str__(self) -> str:
        state = "disabled" if self.disabled_at else "enabled"
        return f"{self.endpoint_id} ({state})"
