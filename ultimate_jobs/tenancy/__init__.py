"""Tenancy (B7): the tenant guard an app's models opt into (``guard``), the scope it
carries into the threads a job body starts (``threads``), and the optional row-level
security the database enforces (``rls``)."""

from __future__ import annotations

from ultimate_jobs.tenancy.guard import (
    TenantScopedManager,
    TenantScopedQuerySet,
    cross_tenant,
)
from ultimate_jobs.tenancy.rls import TenantPolicies, tenant_policies

__all__ = [
    "TenantPolicies",
    "TenantScopedManager",
    "TenantScopedQuerySet",
    "cross_tenant",
    "tenant_policies",
]
