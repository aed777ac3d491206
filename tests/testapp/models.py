from __future__ import annotations

from django.db import models

from ultimate_jobs import TenantScopedManager


class Record(models.Model):
    """What a test job did: one row per event, written by the job body."""

    key = models.CharField(max_length=200)
    event = models.CharField(max_length=50)
    attempt = models.IntegerField(default=0)
    job_id = models.UUIDField(null=True)
    pid = models.IntegerField(default=0)
    tenant_id = models.CharField(max_length=200, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.key}:{self.event}"


class Document(models.Model):
    """A tenant-scoped row of the app (B7): a job body sees its own tenant's only."""

    tenant_id = models.CharField(max_length=200)
    title = models.CharField(max_length=200)

    objects = TenantScopedManager(tenant_field="tenant_id")

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.title}"


class Note(models.Model):
    """A tenant-scoped row held by row-level security too (B7, opt-in): the testapp
    migration creates its policy with ``TenantPolicies``."""

    tenant_id = models.CharField(max_length=200)
    body = models.CharField(max_length=200)

    objects = TenantScopedManager(tenant_field="tenant_id", rls=True)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.body}"
