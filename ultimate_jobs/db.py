"""The only module that opens a cursor: callers pass a named Query and its parameters.

Two doors, one contract (``run(query, **params) -> rows as dicts``):

* ``DjangoDatabase`` runs on Django's connection for the jobs alias, so an enqueue made
  inside ``transaction.atomic`` joins the caller's transaction, and the testing helpers
  see the test's own uncommitted rows.
* ``DirectDatabase`` owns one autocommit psycopg connection, built from the same
  DATABASES entry. The worker's hot path (claim, heartbeat, settle) runs on it, so it is
  never closed by ``close_old_connections()`` between jobs and keeps its prepared
  statements. A broken connection is dropped and re-dialled on the next call.

Both wrap a driver failure once, as ``QueryError(query_name)`` with the cause attached.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, TypeVar, cast

import psycopg
from django.db import DatabaseError, connections
from psycopg.rows import dict_row

from ultimate_jobs.conf import get_settings
from ultimate_jobs.exceptions import QueryError, UnsupportedDatabase
from ultimate_jobs.sql import Query

Row = dict[str, Any]
R = TypeVar("R")


class Database(Protocol):
    """Something that runs a named statement and answers its rows."""

    def run(self, query: Query[R], /, **params: Any) -> list[R]: ...


def _check_params(query: Query[Any], params: dict[str, Any]) -> None:
    """Refuse a call whose parameters are not exactly the statement's: a missing one
    would run with a wrong value, an unknown one would be silently dropped."""
    if missing := query.params - params.keys():
        raise TypeError(f"{query.name}: missing parameters {sorted(missing)}")
    if unknown := params.keys() - query.params:
        raise TypeError(f"{query.name}: unknown parameters {sorted(unknown)}")


def _rows(query: Query[R], cursor: Any) -> list[R]:
    if query.returns == "exec" or cursor.description is None:
        return []
    columns = [column[0] for column in cursor.description]
    return [cast(R, dict(zip(columns, row, strict=True))) for row in cursor.fetchall()]


def _dict_rows(query: Query[R], cursor: psycopg.Cursor[Row]) -> list[R]:
    """Rows of a cursor made with ``dict_row`` (no Column objects built per call)."""
    if (
        query.returns == "exec"
        or cursor.pgresult is None
        or not cursor.pgresult.nfields
    ):
        return []
    return cast(list[R], cursor.fetchall())


def ensure_postgresql(alias: str) -> None:
    """Refuse any database but PostgreSQL, clearly (SQLite is not supported)."""
    vendor = connections[alias].vendor
    if vendor != "postgresql":
        raise UnsupportedDatabase(
            f"DATABASES[{alias!r}] is {vendor}; ultimate_jobs needs PostgreSQL "
            "(SKIP LOCKED, LISTEN/NOTIFY, partial indexes). SQLite is not supported."
        )


class DjangoDatabase:
    """Statements on Django's (thread-local) connection for one alias.

    Django's own cursor binds parameters into the statement text on the client, so a
    big statement (an enqueue of 5,000 rows, 13 arrays) is parsed and planned at every
    call. Unless queries are being logged (DEBUG, assertNumQueries), the statement runs
    on a psycopg cursor of its own over the same connection and transaction instead,
    in its native form (``$1``, see ultimate_jobs.sql): parameters travel apart and the
    statement is prepared once per connection.
    ``PREPARED_STATEMENTS = False`` keeps Django's cursor (behind a proxy that cannot
    hold prepared statements).
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        _check_params(query, params)
        wrapper = connections[self.alias]
        try:
            if wrapper.queries_logged or not _prepared_statements():
                with wrapper.cursor() as cursor:
                    cursor.execute(query.text, params)
                    return _rows(query, cursor)
            with wrapper.wrap_database_errors:
                wrapper.ensure_connection()
                wrapper.validate_no_broken_transaction()
                raw = wrapper.connection
                if raw.prepare_threshold is None:
                    # Django turns preparation off for poolers; PREPARED_STATEMENTS says
                    # this deployment has none. Django's own (client-side) cursor never
                    # prepares, so this reaches only the named statements.
                    raw.prepare_threshold = 5
                with psycopg.RawCursor(raw, row_factory=dict_row) as cursor:
                    cursor.execute(query.native, query.positional(params), prepare=True)
                    return _dict_rows(query, cursor)
        except DatabaseError as exc:
            raise QueryError(query.name, exc) from exc


def _prepared_statements() -> bool:
    return get_settings().PREPARED_STATEMENTS


class DirectDatabase:
    """One autocommit psycopg connection of its own, re-dialled after a failure.

    Not shared between threads: each worker thread that runs statements owns one.
    """

    def __init__(self, alias: str, *, application_name: str = "ultimate_jobs") -> None:
        self.alias = alias
        self.application_name = application_name
        self._conn: psycopg.Connection[Any] | None = None
        self._owner = threading.get_ident()

    def connection_params(self) -> dict[str, Any]:
        ensure_postgresql(self.alias)
        params = dict(connections[self.alias].get_connection_params())
        params.pop("cursor_factory", None)  # server-side binding: prepared statements
        options = connections[self.alias].settings_dict.get("OPTIONS", {})
        if "prepare_threshold" not in options:
            params["prepare_threshold"] = 5 if _prepared_statements() else None
        params.setdefault("application_name", self.application_name)
        # The hot statements are small; JIT compilation would cost more than it saves.
        params["options"] = f"{params.get('options', '')} -c jit=off".strip()
        return params

    def connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self.close()
            try:
                self._conn = psycopg.Connection.connect(
                    autocommit=True, **self.connection_params()
                )
            except psycopg.Error as exc:
                raise QueryError("connect", exc) from exc
        return self._conn

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        _check_params(query, params)
        conn = self.connect()
        try:
            with psycopg.RawCursor(conn, row_factory=dict_row) as cursor:
                cursor.execute(query.native, query.positional(params))
                return _dict_rows(query, cursor)
        except psycopg.Error as exc:
            if conn.broken or isinstance(exc, psycopg.OperationalError):
                self.close()
            raise QueryError(query.name, exc) from exc

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
