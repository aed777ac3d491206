"""Row-level security keyed on the running job's tenant (B7, opt-in): the database
holds a job body to its tenant, raw SQL included.

Two parts:

* ``tenant_policies(app_label, model_name, tenant_field=...)``: a migration operation
  that turns row-level security on for one of the app's own models (``ENABLE`` and
  ``FORCE``, so the table's owner is held too) and creates the policy
  ``ultimate_jobs_tenant`` for reads and writes::

      visible when   app.tenant_scope is unset, '' or 'cross'
                or   app.tenant_scope = 'tenant' and <tenant column> = app.tenant_id

  so outside job bodies (``''``: web requests, shells, migrations) and inside
  ``cross_tenant(...)`` every row is visible, inside a job of tenant T only T's rows,
  and inside a NO_TENANT job (``'none'``) none. Superusers and roles with BYPASSRLS
  are never held by row-level security: run the app as an ordinary role.
* ``install()`` (called when a model declares ``TenantScopedManager(..., rls=True)``):
  a wrapper on every Django database
  connection that, before a statement, sets ``app.tenant_scope`` and
  ``app.tenant_id`` (``set_config``) to the scope of the code running it, when they
  differ from what the connection holds. Each attempt, each step's transaction, the
  ``on_settled`` hook and the threads a body starts therefore run under the job's
  tenant. What the connection holds is known without asking: a value set inside a
  transaction is set again at the transaction's first statement after it ends (a
  rollback undoes ``set_config``), and after a savepoint it was set in is left.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.migrations.operations.base import Operation

from ultimate_jobs.ground.context import guard_scope

POLICY = "ultimate_jobs_tenant"
OUTSIDE, TENANT, NONE, CROSS = "", "tenant", "none", "cross"
_SET = "SELECT set_config('app.tenant_scope', %s, false), set_config('app.tenant_id', %s, false)"


def wanted() -> tuple[str, str]:
    """(app.tenant_scope, app.tenant_id) for the code running here."""
    job, tenant, crossing = guard_scope()
    if job is None:
        return OUTSIDE, ""
    if crossing is not None:
        return CROSS, tenant or ""
    if tenant is None:
        return NONE, ""
    return TENANT, tenant


class _Held:
    """What one connection holds (``now``), and every value it may hold once the
    transaction it was set in ends or a savepoint is left (``after``: a rollback
    undoes ``set_config``). A new connection holds no setting: outside."""

    __slots__ = ("after", "depth", "now", "transaction")

    def __init__(self) -> None:
        self.now: tuple[str, str] = (OUTSIDE, "")
        self.after: frozenset[tuple[str, str]] = frozenset({self.now})
        self.transaction = False  # ``now`` was set inside a transaction
        self.depth = 0  # the savepoints open when it was set

    def possible(self, connection: BaseDatabaseWrapper) -> frozenset[tuple[str, str]]:
        if not self.transaction:
            return frozenset({self.now})
        raw = connection.connection
        ended = raw is None or raw.info.transaction_status == 0  # IDLE
        if not ended and len(connection.savepoint_ids) >= self.depth:
            return frozenset({self.now})
        return self.after | {self.now}

    def setting(self, connection: BaseDatabaseWrapper, value: tuple[str, str]) -> bool:
        """Whether ``value`` must be set before the next statement."""
        possible = self.possible(connection)
        if possible == {value}:
            return False
        if connection.get_autocommit():
            self.now, self.after, self.transaction = value, frozenset({value}), False
        else:
            self.now, self.after = value, possible | {value}
            self.transaction = True
            self.depth = len(connection.savepoint_ids)
        return True


def _wrapper(connection: BaseDatabaseWrapper) -> Callable[..., Any]:
    held = _Held()

    def set_tenant(
        execute: Callable[..., Any], sql: Any, params: Any, *rest: Any
    ) -> Any:
        value = wanted()
        if held.setting(connection, value):
            try:
                rest[-1]["cursor"].cursor.execute(_SET, value)  # the driver's cursor
            except BaseException:
                held.now, held.transaction = ("?", "?"), False  # unknown: set again
                raise
        return execute(sql, params, *rest)

    set_tenant.ultimate_jobs_rls = True  # type: ignore[attr-defined]
    return set_tenant


def _wrap(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor != "postgresql":
        return
    if any(getattr(w, "ultimate_jobs_rls", False) for w in connection.execute_wrappers):
        return
    connection.execute_wrappers.append(_wrapper(connection))


def _on_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    _wrap(connection)


_installed = False
_lock = threading.Lock()


def install() -> None:
    """Set the tenant on every Django connection of this process from now on
    (idempotent): connections opened later, and this thread's open ones."""
    global _installed  # once per process, under the lock
    with _lock:
        if not _installed:
            connection_created.connect(_on_created, weak=False)
            _installed = True
    for alias in connections:
        _wrap(connections[alias])


def policy_sql(table: str, column: str) -> str:
    """The statements that hold ``table`` to the tenant in ``column``."""
    scope = "coalesce(current_setting('app.tenant_scope', true), '')"
    visible = (
        f"({scope} IN ('', 'cross') OR ({scope} = 'tenant' "
        f"AND {column}::text = current_setting('app.tenant_id', true)))"
    )
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
        f"DROP POLICY IF EXISTS {POLICY} ON {table};\n"
        f"CREATE POLICY {POLICY} ON {table} USING {visible} WITH CHECK {visible};"
    )


def drop_policy_sql(table: str) -> str:
    return (
        f"DROP POLICY IF EXISTS {POLICY} ON {table};\n"
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
    )


class TenantPolicies(Operation):
    """A migration operation: row-level security on one model's table, keyed on its
    tenant field (see the module docstring). Reversible."""

    reduces_to_sql = True
    reversible = True

    def __init__(self, model_name: str, tenant_field: str = "tenant_id") -> None:
        self.model_name = model_name
        self.tenant_field = tenant_field

    def state_forwards(self, app_label: str, state: Any) -> None:
        return None

    def _statements(
        self,
        app_label: str,
        schema_editor: Any,
        to_state: Any,
        sql: Callable[[str, str], str],
    ) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        quote = schema_editor.quote_name
        column = model._meta.get_field(self.tenant_field).column
        schema_editor.execute(sql(quote(model._meta.db_table), quote(column)))

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        self._statements(app_label, schema_editor, to_state, policy_sql)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        self._statements(
            app_label,
            schema_editor,
            from_state,
            lambda table, _: drop_policy_sql(table),
        )

    def describe(self) -> str:
        return f"Row-level security on {self.model_name} by {self.tenant_field}"

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (
            "ultimate_jobs.tenancy.rls.TenantPolicies",
            [self.model_name],
            {"tenant_field": self.tenant_field},
        )


def tenant_policies(model_name: str, tenant_field: str = "tenant_id") -> TenantPolicies:
    """The migration operation for ``model_name`` (of the migration's app)."""
    return TenantPolicies(model_name, tenant_field)
