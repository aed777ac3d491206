"""The tenant guard (B7): an opt-in manager that scopes a job body's reads and writes of
the app's own tenant-scoped models to the running job's tenant.

::

    from ultimate_jobs import TenantScopedManager, cross_tenant

    class Invoice(models.Model):
        org_id = models.CharField(max_length=200)
        total = models.DecimalField(max_digits=12, decimal_places=2)

        objects = TenantScopedManager(tenant_field="org_id")

Inside a job body (and its ``on_settled`` hook, and the threads either starts) whose
tenant is ``"acme"``:

* reads answer acme's rows only. The scope is applied when the query RUNS, from the
  code that runs it, never when it is built: a queryset built inside acme's job and
  evaluated later by globex's job or a web request carries no trace of acme;
* ``update()``, ``delete()``, ``bulk_update()`` touch acme's rows only, and a write
  that would move a row to another tenant (``update(org_id="globex")``,
  ``bulk_update(objs, ["org_id"])`` with another tenant's id) is refused with
  ``JobTenantMismatch`` before any SQL;
* ``create()``/``bulk_create()`` fill ``org_id="acme"`` in (naming another tenant is
  ``JobTenantMismatch``); ``bulk_create(update_conflicts=True)`` is refused when a
  conflicting row belongs to another tenant;
* ``instance.save()`` and ``instance.delete()`` (through any manager) are refused when
  the instance names another tenant or its stored row belongs to one.

A body WITHOUT a tenant (``NO_TENANT``) that reads or writes tenant rows gets
``TenantScopeRequired`` (``X_TENANT_SCOPE_REQUIRED``), unless it is inside
``cross_tenant(reason=...)``, which lifts the scope for the block and logs
``jobs.tenant.cross`` with the reason. Outside job bodies (web requests, shells,
migrations) the manager is a plain manager. Raw SQL is not seen here: the database's
row-level security sees it (``ultimate_jobs.tenancy.rls``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from django.db import models
from django.db.models import Q
from django.db.models.signals import pre_delete, pre_save

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.context import (
    crossing_scope,
    current_crossing,
    current_job,
    current_tenant,
)
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobTenantMismatch,
    TenantScopeRequired,
)
from ultimate_jobs.tenancy import rls, threads

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=models.Model)


@contextlib.contextmanager
def cross_tenant(*, reason: str) -> Iterator[None]:
    """Lift the tenant guard for the block: a read or write that spans tenants on
    purpose. ``reason`` (required) is logged as ``jobs.tenant.cross`` with the job
    and its tenant; with row-level security on, the block's statements see every
    tenant too (``app.tenant_scope = 'cross'``)."""
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
    with crossing_scope(reason[:500]):
        yield


def scope() -> tuple[bool, str | None]:
    """(guarded, tenant): guarded inside a job body and outside cross_tenant."""
    if current_job() is None or current_crossing() is not None:
        return False, None
    return True, current_tenant()


def _tenant_or_refuse(model: type[models.Model]) -> str | None:
    """The tenant a guarded statement is held to; None when not guarded. A body
    without a tenant is refused (TenantScopeRequired)."""
    guarded, tenant = scope()
    if not guarded:
        return None
    if tenant is None:
        raise TenantScopeRequired(model._meta.label, current_job() or "")
    return tenant


def _refuse_other(field: str, given: Any, tenant: str) -> None:
    if given is not None and str(given) != tenant:
        raise JobTenantMismatch(current_job() or "", field, given, tenant)


class TenantScopedQuerySet(models.QuerySet[M], Generic[M]):
    """A QuerySet whose statements, run inside a job body, hold to its tenant."""

    tenant_field = "tenant_id"
    _scoped_to: str | None = None  # the tenant this clone's filter was added for

    def _clone(self) -> TenantScopedQuerySet[M]:
        clone: TenantScopedQuerySet[M] = super()._clone()  # type: ignore[misc]
        clone.tenant_field = self.tenant_field
        clone._scoped_to = self._scoped_to
        return clone

    # -- the scope, applied when a statement runs ---------------------------------

    def _held(self) -> TenantScopedQuerySet[M]:
        """This queryset as the running code may run it: itself outside a guarded
        body, else a clone with the tenant's filter added to its WHERE (also after a
        slice: WHERE comes before LIMIT)."""
        tenant = _tenant_or_refuse(self.model)
        if tenant is None or self._scoped_to == tenant:
            return self
        clone = self._clone()
        clone.query.add_q(Q(**{self.tenant_field: tenant}))
        clone._scoped_to = tenant
        return clone

    def _fetch_all(self) -> None:
        if self._result_cache is None:
            held = self._held()
            if held is not self:
                held._fetch_all()
                self._result_cache = held._result_cache
                self._prefetch_done = held._prefetch_done  # type: ignore[has-type]
                return
        super()._fetch_all()

    def iterator(self, chunk_size: int | None = None) -> Iterator[M]:
        held = self._held()
        if held is not self:
            return held.iterator(chunk_size)
        return super().iterator(chunk_size)

    def count(self) -> int:
        held = self._held()
        return held.count() if held is not self else super().count()

    def exists(self) -> bool:
        held = self._held()
        return held.exists() if held is not self else super().exists()

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        held = self._held()
        if held is not self:
            return held.aggregate(*args, **kwargs)
        return super().aggregate(*args, **kwargs)

    def explain(self, *, format: Any = None, **options: Any) -> str:
        held = self._held()
        if held is not self:
            return held.explain(format=format, **options)
        return super().explain(format=format, **options)

    def update(self, **kwargs: Any) -> int:
        tenant = _tenant_or_refuse(self.model)
        if tenant is not None and self.tenant_field in kwargs:
            value = kwargs[self.tenant_field]
            if hasattr(value, "resolve_expression"):
                raise JobTenantMismatch(
                    current_job() or "", self.tenant_field, repr(value), tenant
                )
            _refuse_other(self.tenant_field, value, tenant)
        held = self._held()
        return held.update(**kwargs) if held is not self else super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        held = self._held()
        if held is not self:
            return held.delete()
        token = _collected.set(self._scoped_to)
        try:
            return super().delete()
        finally:
            _collected.reset(token)

    # -- writes that name a tenant ---------------------------------------------------

    def _own(self, values: dict[str, Any]) -> dict[str, Any]:
        tenant = _tenant_or_refuse(self.model)
        if tenant is None:
            return values
        given = values.get(self.tenant_field)
        if given is None:
            return {**values, self.tenant_field: tenant}
        _refuse_other(self.tenant_field, given, tenant)
        return values

    def create(self, **kwargs: Any) -> M:
        return super().create(**self._own(kwargs))

    def get_or_create(self, defaults: Any = None, **kwargs: Any) -> tuple[M, bool]:
        return super().get_or_create(defaults, **self._own(kwargs))

    def update_or_create(
        self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any
    ) -> tuple[M, bool]:
        return super().update_or_create(defaults, create_defaults, **self._own(kwargs))

    def bulk_create(self, objs: Iterable[M], *args: Any, **kwargs: Any) -> list[M]:
        objs = list(objs)
        tenant = _tenant_or_refuse(self.model)
        if tenant is None:
            return super().bulk_create(objs, *args, **kwargs)
        for obj in objs:
            given = getattr(obj, self.tenant_field)
            if given not in (None, ""):
                _refuse_other(self.tenant_field, given, tenant)
            setattr(obj, self.tenant_field, tenant)
        if kwargs.get("update_conflicts"):
            self._refuse_foreign_conflicts(objs, kwargs.get("unique_fields"), tenant)
        return super().bulk_create(objs, *args, **kwargs)

    def _refuse_foreign_conflicts(
        self, objs: list[M], unique_fields: Any, tenant: str
    ) -> None:
        """``bulk_create(update_conflicts=True)`` would overwrite the row it collides
        with whoever owns it: refused when one of those rows is another tenant's."""
        fields = list(unique_fields or [self.model._meta.pk.name])
        collides = Q()
        for obj in objs:
            collides |= Q(**{name: getattr(obj, name) for name in fields})
        base = self.model._base_manager.using(self.db)
        foreign = (
            base.filter(collides)
            .exclude(**{self.tenant_field: tenant})
            .values_list(self.tenant_field, flat=True)
            .first()
        )
        if foreign is not None:
            raise JobTenantMismatch(
                current_job() or "",
                f"{self.tenant_field} (conflicting row)",
                foreign,
                tenant,
            )

    def bulk_update(
        self, objs: Iterable[M], fields: Iterable[str], batch_size: int | None = None
    ) -> int:
        objs, fields = list(objs), list(fields)
        tenant = _tenant_or_refuse(self.model)
        if tenant is not None:
            for obj in objs:
                _refuse_other(
                    self.tenant_field, getattr(obj, self.tenant_field), tenant
                )
            # Every row it may touch is this tenant's (the update is scoped), and
            # every object names this tenant: the column would not change.
            fields = [name for name in fields if name != self.tenant_field] or fields
        return super().bulk_update(objs, fields, batch_size)


class TenantScopedManager(models.Manager[M], Generic[M]):
    """A manager whose queries, inside a job body, hold to the job's tenant (B7).

    ``tenant_field`` names the model field that holds the tenant id. Declaring it also
    guards ``instance.save()`` and ``instance.delete()`` of the model (signals) and
    makes the threads a job body starts run under the body's scope.
    """

    def __init__(self, tenant_field: str = "tenant_id", *, rls: bool = False) -> None:
        super().__init__()
        if not isinstance(tenant_field, str) or not tenant_field:
            raise InvalidArgument(
                "tenant_field", tenant_field, "the name of the model's tenant field"
            )
        validate.flag(rls, field="rls")
        self.tenant_field = tenant_field
        self.rls = rls

    def contribute_to_class(self, cls: type[M], name: str) -> None:  # type: ignore[override]
        super().contribute_to_class(cls, name)
        if not cls._meta.abstract:
            _guard_instances(cls, self.tenant_field)
        threads.follow_job_scope()
        if self.rls:
            rls.install()

    def get_queryset(self) -> TenantScopedQuerySet[M]:
        queryset: TenantScopedQuerySet[M] = TenantScopedQuerySet(
            self.model, using=self._db
        )
        queryset.tenant_field = self.tenant_field
        return queryset


_guarded_models: dict[type[models.Model], str] = {}
# The tenant a scoped queryset delete() collects its rows for: the rows it hands to
# pre_delete were read under that tenant, so they are not read again one by one.
_collected: ContextVar[str | None] = ContextVar(
    "ultimate_jobs_tenant_collected", default=None
)


def _guard_instances(model: type[models.Model], field: str) -> None:
    """Connect the save/delete checks of ``model`` once."""
    if model in _guarded_models:
        return
    _guarded_models[model] = field
    pre_save.connect(_before_save, sender=model, weak=False)
    pre_delete.connect(_before_delete, sender=model, weak=False)


def _stored_tenant(instance: models.Model, field: str, using: str | None) -> Any:
    """The tenant of the row ``instance`` would overwrite (None: no such row)."""
    if instance.pk is None:
        return None
    base = type(instance)._base_manager.using(using)
    return base.filter(pk=instance.pk).values_list(field, flat=True).first()


def _before_save(
    sender: type[models.Model],
    instance: models.Model,
    **kwargs: Any,
) -> None:
    """``instance.save()`` in a guarded body: the instance must name the body's
    tenant (filled in when empty) and the row it overwrites must be that tenant's."""
    if kwargs.get("raw"):
        return
    using = kwargs.get("using")
    tenant = _tenant_or_refuse(sender)
    if tenant is None:
        return
    field = _guarded_models[sender]
    given = getattr(instance, field)
    if given in (None, ""):
        setattr(instance, field, tenant)
    else:
        _refuse_other(field, given, tenant)
    # A row it would overwrite (an instance read earlier, or one made with a known
    # primary key: save() updates it when it exists) must be this tenant's.
    _refuse_other(field, _stored_tenant(instance, field, using), tenant)


def _before_delete(
    sender: type[models.Model],
    instance: models.Model,
    using: str | None = None,
    **kwargs: Any,
) -> None:
    """``instance.delete()`` in a guarded body: only the body's tenant's row."""
    tenant = _tenant_or_refuse(sender)
    if tenant is None:
        return
    field = _guarded_models[sender]
    _refuse_other(field, getattr(instance, field), tenant)
    if _collected.get() != tenant:
        _refuse_other(field, _stored_tenant(instance, field, using), tenant)
