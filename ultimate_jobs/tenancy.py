"""The tenant guard (B7): an opt-in manager that scopes a job body's reads and writes of
the app's own tenant-scoped models to the running job's tenant.

::

    from ultimate_jobs import TenantScopedManager, cross_tenant

    class Invoice(models.Model):
        org_id = models.CharField(max_length=200)
        total = models.DecimalField(max_digits=12, decimal_places=2)

        objects = TenantScopedManager(tenant_field="org_id")

Inside a job body (and its ``on_settled`` hook) whose tenant is ``"acme"``,
``Invoice.objects`` answers acme's invoices only, ``.update()`` and ``.delete()`` touch
acme's only, and ``Invoice.objects.create(...)`` fills ``org_id="acme"`` in (naming
another tenant is ``JobTenantMismatch``). A body WITHOUT a tenant (``NO_TENANT``) that
reads tenant rows gets ``TenantScopeRequired`` (``X_TENANT_SCOPE_REQUIRED``), unless
the read is inside ``cross_tenant(reason=...)``, which lifts the scope for the block
and logs ``jobs.tenant.cross`` with the reason. Outside job bodies (web requests,
shells, migrations) the manager is a plain manager.

What it cannot see: ``Model.save()`` on an instance, raw SQL, and other managers of
the model (``Invoice._base_manager``, a second manager); the guard covers the
reads and writes made through this manager.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from django.db import models

from ultimate_jobs.ground.context import current_job, current_tenant
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobTenantMismatch,
    TenantScopeRequired,
)

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=models.Model)

_crossing: ContextVar[str | None] = ContextVar(
    "ultimate_jobs_cross_tenant", default=None
)


@contextlib.contextmanager
def cross_tenant(*, reason: str) -> Iterator[None]:
    """Lift the tenant guard for the block: a read or write that spans tenants on
    purpose. ``reason`` (required) is logged as ``jobs.tenant.cross`` with the job
    and its tenant."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(
            "reason", reason, "say why the block reads across tenants"
        )
    logger.warning(
        "jobs.tenant.cross",
        extra={
            "job_name": current_job(),
            "tenant_id": current_tenant(),
            "reason": reason[:500],
        },
    )
    token = _crossing.set(reason)
    try:
        yield
    finally:
        _crossing.reset(token)


def _scope() -> tuple[bool, str | None]:
    """(guarded, tenant): guarded inside a job body and outside cross_tenant."""
    if current_job() is None or _crossing.get() is not None:
        return False, None
    return True, current_tenant()


class TenantScopedQuerySet(models.QuerySet[M], Generic[M]):
    """Creates fill the running job's tenant in, and refuse another one."""

    tenant_field = "tenant_id"

    def _clone(self) -> TenantScopedQuerySet[M]:
        clone: TenantScopedQuerySet[M] = super()._clone()  # type: ignore[misc]
        clone.tenant_field = self.tenant_field
        return clone

    def _own(self, values: dict[str, Any]) -> dict[str, Any]:
        guarded, tenant = _scope()
        if not guarded:
            return values
        if tenant is None:
            raise TenantScopeRequired(self.model._meta.label, current_job() or "")
        given = values.get(self.tenant_field)
        if given is None:
            return {**values, self.tenant_field: tenant}
        if str(given) != tenant:
            raise JobTenantMismatch(
                current_job() or "", self.tenant_field, given, tenant
            )
        return values

    def create(self, **kwargs: Any) -> M:
        return super().create(**self._own(kwargs))

    def get_or_create(self, defaults: Any = None, **kwargs: Any) -> tuple[M, bool]:
        return super().get_or_create(defaults, **self._own(kwargs))

    def update_or_create(
        self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any
    ) -> tuple[M, bool]:
        return super().update_or_create(defaults, create_defaults, **self._own(kwargs))

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[M]:
        objs = list(objs)
        for obj in objs:
            values = self._own({self.tenant_field: getattr(obj, self.tenant_field)})
            setattr(obj, self.tenant_field, values[self.tenant_field])
        return super().bulk_create(objs, *args, **kwargs)


class TenantScopedManager(models.Manager[M], Generic[M]):
    """A manager whose queries, inside a job body, see the job's tenant only (B7).

    ``tenant_field`` names the model field that holds the tenant id.
    """

    def __init__(self, tenant_field: str = "tenant_id") -> None:
        super().__init__()
        if not isinstance(tenant_field, str) or not tenant_field:
            raise InvalidArgument(
                "tenant_field", tenant_field, "the name of the model's tenant field"
            )
        self.tenant_field = tenant_field

    def get_queryset(self) -> TenantScopedQuerySet[M]:
        queryset: TenantScopedQuerySet[M] = TenantScopedQuerySet(
            self.model, using=self._db
        )
        queryset.tenant_field = self.tenant_field
        guarded, tenant = _scope()
        if not guarded:
            return queryset
        if tenant is None:
            raise TenantScopeRequired(self.model._meta.label, current_job() or "")
        return queryset.filter(**{self.tenant_field: tenant})
