"""The only module that opens a cursor: callers pass a named Query and its parameters.

Two doors, one contract (``run(query, **params) -> rows as dicts``):

* ``DjangoDatabase`` runs on Django's connection for the jobs alias, so an enqueue made
  inside ``transaction.atomic`` joins the caller's transaction, and the testing helpers
  see the test's own uncommitted rows.
* ``DirectDatabase`` owns one autocommit psycopg connection, built from the same
  DATABASES entry. The worker's hot path (claim, heartbeat, settle) runs on it, so it is
  never closed by ``close_old_connections()`` between jobs and keeps its prepared
  statements. A broken connection is dropped and re-dialled on the next call.
* ``DatabasePool`` is a fixed number of ``DirectDatabase`` connections that threads
  share, one statement at a time: a worker's handler threads write through it, so a
  process holds ``POOL_SIZE`` connections for them however many threads it runs.

Both wrap a driver failure once, as ``QueryError(query_name)`` with the cause attached.

* ``DirectDatabase.hot`` is the hot path's own small door (the claims and the batched
  completions, N2): the same named statements, executed on the connection's libpq
  wrapper (``pgconn``) with no cursor: prepared once per connection under their own
  name (unnamed, parsed per call, when ``PREPARED_STATEMENTS = False``: a pooler in
  transaction mode), array parameters sent in their binary form, results asked in
  binary and each row read straight into the statement's typed record (a dict
  made by one compiled function per statement, ``_row_maker``).
  ``hot_door(db)`` answers it, or ``db.run`` for a database without one.

A row Python cannot read (a timestamp past year 9999, an integer of thousands of
digits: written by an older version or by hand) never fails a whole answer (B4): the
rows around it are answered, and it is left out, logged ``jobs.row.unreadable`` with
the statement's name and the row's raw ``id``, counted, and kept on the database's
``unreadable`` list (the raw text of each column) for the caller to record.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import psycopg
from django.apps import apps
from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, connections
from django.dispatch import receiver
from psycopg import adapt, pq
from psycopg.rows import dict_row

if TYPE_CHECKING:
    from psycopg.pq.abc import PGresult

from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.exceptions import (
    AppNotInstalled,
    QueryError,
    UnsupportedDatabase,
)
from ultimate_jobs.sql import Query, arrays
from ultimate_jobs.sql.arrays import BinaryArray

Row = dict[str, Any]
R = TypeVar("R")
logger = logging.getLogger(__name__)

# What reading a value may raise: a timestamp past 9999 or before year 1 (DataError),
# an integer too long for str() (ValueError), JSON nested past the recursion limit.
UNREADABLE = (psycopg.DataError, ValueError, RecursionError, OverflowError)
# psycopg's own text loader of timestamptz: its C implementation when installed.
_TIMESTAMPTZ_LOADER = psycopg.adapters.get_loader(
    psycopg.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT
)


@dataclass(frozen=True)
class Unreadable:
    """A row a statement answered that Python could not read: its columns as the raw
    text PostgreSQL sent (always readable), and why it could not be read."""

    query: str
    values: dict[str, str | None]
    error: str

    @property
    def id(self) -> str | None:
        return self.values.get("id")


def _raw(cursor: Any, position: int) -> dict[str, str | None]:
    result = cursor.pgresult
    values: dict[str, str | None] = {}
    for column in range(result.nfields):
        raw = result.get_value(position, column)
        name = (result.fname(column) or b"").decode()
        values[name] = None if raw is None else bytes(raw).decode("utf-8", "replace")
    return values


def fetch_readable(
    query_name: str, cursor: Any, first_error: BaseException
) -> tuple[list[Any], list[Unreadable]]:
    """After ``fetchall`` failed: read the answer row by row, leaving out the rows that
    cannot be read. ``cursor`` is a psycopg cursor whose result is still held."""
    rows: list[Any] = []
    skipped: list[Unreadable] = []
    result = cursor.pgresult
    for position in range(result.ntuples if result is not None else 0):
        cursor.scroll(position, mode="absolute")
        try:
            rows.append(cursor.fetchone())
        except UNREADABLE as exc:
            skipped.append(Unreadable(query_name, _raw(cursor, position), str(exc)))
    for row in skipped:
        logger.error(
            "jobs.row.unreadable",
            extra={"query": row.query, "row_id": row.id, "error": row.error[:300]},
        )
    if not skipped:  # the first failure was not a row's value: let it be seen
        raise first_error
    return rows, skipped


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


def _rows(query: Query[R], cursor: Any, unreadable: list[Unreadable]) -> list[R]:
    if query.returns == "exec" or cursor.description is None:
        return []
    columns = [column[0] for column in cursor.description]
    try:
        fetched = cursor.fetchall()
    except Exception as exc:
        raw = cursor.cursor  # Django's wrapper: the psycopg cursor holds the result
        cause = exc.__cause__ if isinstance(exc.__cause__, UNREADABLE) else exc
        if not isinstance(cause, UNREADABLE):
            raise
        fetched, skipped = fetch_readable(query.name, raw, cause)
        unreadable.extend(skipped)
    return [cast(R, dict(zip(columns, row, strict=True))) for row in fetched]


def _dict_rows(
    query: Query[R], cursor: psycopg.Cursor[Row], unreadable: list[Unreadable]
) -> list[R]:
    """Rows of a cursor made with ``dict_row`` (no Column objects built per call)."""
    if (
        query.returns == "exec"
        or cursor.pgresult is None
        or not cursor.pgresult.nfields
    ):
        return []
    try:
        return cast(list[R], cursor.fetchall())
    except UNREADABLE as exc:
        rows, skipped = fetch_readable(query.name, cursor, exc)
        unreadable.extend(skipped)
        return cast(list[R], rows)


# The aliases ensure_jobs_database found fit: what it asks does not change while the
# process runs, except under a test's override_settings (setting_changed, below).
_FIT: set[str] = set()


def ensure_jobs_database(alias: str) -> None:
    """Refuse, with a coded error that says what to do, a write the jobs tables cannot
    take: the app missing from INSTALLED_APPS, or ``alias`` not PostgreSQL.

    Answered once per alias (issue 26: every enqueue asks); forgotten when a test
    changes INSTALLED_APPS or DATABASES (``override_settings``)."""
    if alias in _FIT:
        return
    if not apps.is_installed("ultimate_jobs"):
        raise AppNotInstalled(
            "'ultimate_jobs' is not in INSTALLED_APPS: add it, then run "
            "manage.py migrate (its tables, its commands and the discovery of your "
            "apps' jobs modules come with it)"
        )
    ensure_postgresql(alias)
    _FIT.add(alias)


@receiver(setting_changed)
def _forget_fit(*, setting: str, **kwargs: Any) -> None:
    if setting in ("INSTALLED_APPS", "DATABASES"):
        _FIT.clear()


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
        self.unreadable: list[Unreadable] = []  # the last run's unreadable rows

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        _check_params(query, params)
        wrapper = connections[self.alias]
        self.unreadable = []
        try:
            if wrapper.queries_logged or not _prepared_statements():
                with wrapper.cursor() as cursor:
                    cursor.execute(query.text, arrays.plain(params))
                    return _rows(query, cursor, self.unreadable)
            with wrapper.wrap_database_errors:
                wrapper.ensure_connection()
                wrapper.validate_no_broken_transaction()
                raw = wrapper.connection
                if raw.prepare_threshold is None:
                    # Django turns preparation off for poolers; PREPARED_STATEMENTS says
                    # this deployment has none. Django's own (client-side) cursor never
                    # prepares, so this reaches only the named statements.
                    raw.prepare_threshold = 5
                arrays.register(raw.adapters)
                with psycopg.RawCursor(raw, row_factory=dict_row) as cursor:
                    cursor.execute(query.native, query.positional(params), prepare=True)
                    return _dict_rows(query, cursor, self.unreadable)
        except DatabaseError as exc:
            raise QueryError(query.name, exc) from exc

    def hot(self, query: Query[R], /, **params: Any) -> list[R]:
        """``run`` through the hot door (``_Hot``) on Django's own connection, for the
        enqueue's statements (issue 26): one prepared round trip, binary parameters and
        results, no cursor. Only outside a transaction (autocommit, no atomic block):
        the door sends no BEGIN, so a statement inside one takes ``run``, which joins
        it; likewise while queries are logged or without prepared statements."""
        wrapper = connections[self.alias]
        if wrapper.queries_logged or not _prepared_statements():
            return self.run(query, **params)
        _check_params(query, params)
        self.unreadable = []
        try:
            with wrapper.wrap_database_errors:
                wrapper.ensure_connection()
                raw = wrapper.connection
                if (
                    wrapper.in_atomic_block
                    or not raw.autocommit
                    or raw.pgconn.transaction_status != pq.TransactionStatus.IDLE
                ):
                    return self.run(query, **params)
                # The door's state lives on the connection it prepared on (the
                # statements the server holds for that session): a new connection
                # gets a new door, and no other connection can see this one's.
                hot = getattr(raw, _DOOR, None)
                if hot is None:
                    hot = _Hot(raw, prepare=True)
                    setattr(raw, _DOOR, hot)
                return hot.run(query, params, self.unreadable)
        except DatabaseError as exc:
            raise QueryError(query.name, exc) from exc


def _prepared_statements() -> bool:
    return get_settings().PREPARED_STATEMENTS


class DirectDatabase:
    """One autocommit psycopg connection of its own, re-dialled after a failure.

    Not shared between threads: each worker thread that runs statements owns one.
    """

    def __init__(
        self,
        alias: str,
        *,
        application_name: str = "ultimate_jobs",
        synchronous_commit: bool = False,
    ) -> None:
        self.alias = alias
        self.application_name = application_name
        # True: this session's commits are durable when they return, whatever the
        # server's synchronous_commit (the relay's, docs/outbox.md; issue 31).
        self.synchronous_commit = synchronous_commit
        self._conn: psycopg.Connection[Any] | None = None
        self._owner = threading.get_ident()
        self.unreadable: list[Unreadable] = []  # the last run's unreadable rows
        self._hot: _Hot | None = None  # the hot door's state on this connection

    def connection_params(self) -> dict[str, Any]:
        ensure_postgresql(self.alias)
        params = dict(connections[self.alias].get_connection_params())
        params.pop("cursor_factory", None)  # server-side binding: prepared statements
        options = connections[self.alias].settings_dict.get("OPTIONS", {})
        if "prepare_threshold" not in options:
            params["prepare_threshold"] = 5 if _prepared_statements() else None
        params.setdefault("application_name", self.application_name)
        # The hot statements are small; JIT compilation would cost more than it saves.
        options = f"{params.get('options', '')} -c jit=off"
        if self.synchronous_commit:
            options += " -c synchronous_commit=on"
        context = params.get("context")
        if context is not None and settings.USE_TZ and _TIMESTAMPTZ_LOADER:
            # Django's adapters load timestamptz in Python (its BaseTzLoader), a tenth
            # of a claim's cost; psycopg's own loader (C, when psycopg[binary] or [c]
            # is installed) reads the same value in the connection's time zone, which
            # is set to Django's, so the datetimes answered are the same instants in
            # the same zone. Django's other loaders (jsonb as text) stay.
            context = adapt.AdaptersMap(context)
            context.register_loader("timestamptz", _TIMESTAMPTZ_LOADER)
            params["context"] = context
            options += f" -c TimeZone={connections[self.alias].timezone_name}"
        params["options"] = options.strip()
        return params

    def connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self.close()
            try:
                self._conn = psycopg.Connection.connect(
                    autocommit=True, **self.connection_params()
                )
                arrays.register(self._conn.adapters)
            except psycopg.Error as exc:
                raise QueryError("connect", exc) from exc
        return self._conn

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        _check_params(query, params)
        conn = self.connect()
        self.unreadable = []
        try:
            with psycopg.RawCursor(conn, row_factory=dict_row) as cursor:
                cursor.execute(query.native, query.positional(params))
                return _dict_rows(query, cursor, self.unreadable)
        except psycopg.Error as exc:
            if conn.broken or isinstance(exc, psycopg.OperationalError):
                self.close()
            raise QueryError(query.name, exc) from exc

    def hot(self, query: Query[R], /, **params: Any) -> list[R]:
        """``run`` below the cursor, for the hot path (see the module's doc): the same
        statement, parameters and rows; a driver failure is the same ``QueryError``."""
        _check_params(query, params)
        conn = self.connect()
        hot = self._hot
        if hot is None or hot.conn is not conn:
            hot = self._hot = _Hot(conn, prepare=_prepared_statements())
        self.unreadable = []
        try:
            return hot.run(query, params, self.unreadable)
        except psycopg.Error as exc:
            if conn.broken or isinstance(exc, psycopg.OperationalError):
                self.close()
            raise QueryError(query.name, exc) from exc

    def close(self) -> None:
        self._hot = None
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass


_TEXT = pq.Format.TEXT
_BINARY = pq.Format.BINARY
_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
# A prepared statement the server no longer holds (a DISCARD ALL, a failover).
_GONE = "26000"


class _JsonbText(adapt.Loader):
    """Binary jsonb read as its JSON text (a version byte, 1, then the text): the hot
    door answers ``input`` as the text the cursor path answers (Django's loader)."""

    format = _BINARY

    def load(self, data: Any) -> str:
        raw = bytes(data)
        if raw[:1] != b"\x01":
            raise psycopg.DataError(f"unknown jsonb binary format: {raw[:1]!r}")
        return raw[1:].decode()


def _scalar(value: Any, dump: Callable[[Any], Any]) -> bytes | None:
    """One scalar parameter in text form, its type left for the server to infer from
    the statement's cast (every parameter of the named statements has one)."""
    if value is None:
        return None
    kind = type(value)
    if kind is str:
        return cast(str, value).encode()
    if kind is bool:
        return b"t" if value else b"f"
    if kind is int or kind is float:
        return repr(value).encode()
    if isinstance(value, datetime):
        return value.isoformat().encode()
    return bytes(dump(value))


def _row_maker(columns: Sequence[str]) -> Callable[[Sequence[Any]], Row]:
    """The function that makes one answer's row dict from its values, for one
    statement's columns: a dict display of constant keys, about half the cost of
    ``dict(zip(columns, values))`` per row (N2, issue 26). The keys are the column
    names PostgreSQL described, written as Python string literals (``repr``)."""
    items = ", ".join(f"{name!r}: v[{i}]" for i, name in enumerate(columns))
    made = eval(f"lambda v: {{{items}}}", {})  # noqa: S307 - literals only, above
    return cast(Callable[[Sequence[Any]], Row], made)


class _Hot:
    """The hot door's state on one connection: the statements prepared on it, the
    column names of each statement's answer, one Transformer reused per call."""

    def __init__(self, conn: psycopg.Connection[Any], *, prepare: bool) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.prepare = prepare
        self.prepared: set[bytes] = set()
        # Each statement's answer: its column names and the function that makes a
        # row's dict from its values (``_row_maker``).
        self.shapes: dict[str, tuple[tuple[str, ...], Callable[..., Row]]] = {}
        conn.adapters.register_loader("jsonb", _JsonbText)  # binary format only
        self.tx = adapt.Transformer(conn)
        self.encoding = conn.info.encoding

    def _dump(self, value: Any) -> Any:
        return self.tx.get_dumper(value, adapt.PyFormat.TEXT).dump(value)

    def _execute(self, query: Query[Any], params: dict[str, Any]) -> PGresult:
        values: list[bytes | None] = []
        types: list[int] = []
        formats: list[int] = []
        for name in query.order:
            value = params[name]
            if type(value) is BinaryArray:
                values.append(value.data)
                types.append(value.oid)
                formats.append(_BINARY)
            else:
                values.append(_scalar(value, self._dump))
                types.append(0)
                formats.append(_TEXT)
        if not self.prepare:
            return self.pgconn.exec_params(
                query.native.encode(), values, types, formats, _BINARY
            )
        statement = f"uj_{query.name}".encode()
        for _ in range(2):
            if statement not in self.prepared:
                result = self.pgconn.prepare(statement, query.native.encode(), types)
                if result.status != pq.ExecStatus.COMMAND_OK:
                    raise psycopg.errors.error_from_result(result, self.encoding)
                self.prepared.add(statement)
            # A NULL parameter is None, as libpq takes it (the stubs say bytes only).
            result = self.pgconn.exec_prepared(
                statement, cast(list[bytes], values), formats, _BINARY
            )
            if result.error_field(pq.DiagnosticField.SQLSTATE) != _GONE.encode():
                break
            self.prepared.discard(statement)  # prepared again on the next call
            if self.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                break  # a transaction the failure aborted: the caller's to handle
            # Outside a transaction nothing ran: prepare it again and run it now (a
            # psycopg ROLLBACK on Django's connection sends DEALLOCATE ALL).
        return result

    def run(
        self, query: Query[R], params: dict[str, Any], unreadable: list[Unreadable]
    ) -> list[R]:
        result = self._execute(query, params)
        if result.status not in _OK:
            raise psycopg.errors.error_from_result(result, self.encoding)
        if query.returns == "exec" or not result.nfields:
            return []
        shape = self.shapes.get(query.name)
        if shape is None:
            columns = tuple(
                (result.fname(i) or b"").decode() for i in range(result.nfields)
            )
            shape = self.shapes[query.name] = (columns, _row_maker(columns))
        columns, make = shape
        tx = self.tx
        tx.set_pgresult(result, format=_BINARY)
        try:
            return cast(list[R], tx.load_rows(0, result.ntuples, make))
        except UNREADABLE as exc:
            rows = self._readable(query.name, result, columns, unreadable, exc)
        return [cast(R, make(row)) for row in rows]

    def _readable(
        self,
        query_name: str,
        result: PGresult,
        columns: tuple[str, ...],
        unreadable: list[Unreadable],
        first_error: BaseException,
    ) -> list[tuple[Any, ...]]:
        """After a row failed to load: the rows that load, and each one that does not
        as an ``Unreadable`` whose values are its columns in text (B4)."""
        rows: list[tuple[Any, ...]] = []
        skipped: list[Unreadable] = []
        for position in range(result.ntuples):
            try:
                rows.append(self.tx.load_row(position, tuple))
            except UNREADABLE as exc:
                values = self._texts(result, position, columns)
                skipped.append(Unreadable(query_name, values, str(exc)))
        for row in skipped:
            logger.error(
                "jobs.row.unreadable",
                extra={"query": row.query, "row_id": row.id, "error": row.error[:300]},
            )
        if not skipped:
            raise first_error
        unreadable.extend(skipped)
        return rows

    def _texts(
        self, result: PGresult, position: int, columns: tuple[str, ...]
    ) -> dict[str, str | None]:
        """One row's columns as text: each value read alone and written as PostgreSQL
        writes it (a boolean 't'/'f'); one that cannot be read, as its bytes in hex."""
        values: dict[str, str | None] = {}
        for column, name in enumerate(columns):
            raw = result.get_value(position, column)
            if raw is None:
                values[name] = None
                continue
            loader = self.tx.get_loader(result.ftype(column), _BINARY)
            try:
                value = loader.load(raw)
            except UNREADABLE:
                values[name] = "\\x" + bytes(raw).hex()
                continue
            if isinstance(value, bool):
                values[name] = "t" if value else "f"
            else:
                values[name] = str(value)
        return values


# The attribute of a Django-made psycopg connection holding its hot door's state.
_DOOR = "_ultimate_jobs_hot_door"


def hot_door(db: Any) -> Callable[..., list[Any]]:
    """``db.hot`` when ``db`` has the hot door (a ``DirectDatabase``), else ``db.run``
    (Django's connection in the testing runner, a pool)."""
    door: Callable[..., list[Any]] | None = getattr(db, "hot", None)
    return door if door is not None else db.run


class DatabasePool:
    """``size`` autocommit connections shared by threads, one statement at a time.

    Each ``run`` takes a free connection, runs one statement and puts the connection
    back, so no session state lives across calls (none is needed: every statement
    commits on its own) and a thread never holds a connection while it is not talking
    to the server. ``open`` dials every connection at once, so a process holds exactly
    ``size`` of them from its start (the count docs/scaling.md plans with); one that
    fails to dial, or breaks later, is re-dialled by the next statement that takes it.
    """

    def __init__(
        self, alias: str, *, size: int, application_name: str = "ultimate_jobs pool"
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool holds at least one connection, not {size}")
        self.alias = alias
        self.size = size
        self._members = [
            DirectDatabase(alias, application_name=application_name)
            for _ in range(size)
        ]
        self._free: queue.SimpleQueue[DirectDatabase] = queue.SimpleQueue()
        for member in self._members:
            self._free.put(member)
        self._closed = False

    def open(self) -> None:
        """Dial every connection now; one that fails is re-dialled at its first use."""
        for member in self._members:
            try:
                member.connect()
            except QueryError as exc:
                logger.warning(
                    "jobs.pool.connect-failed",
                    extra={"alias": self.alias, "error": str(exc)},
                )

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        return self.run_within(None, query, **params)

    def run_within(
        self, wait: float | None, query: Query[R], /, **params: Any
    ) -> list[R]:
        """``run``, waiting at most ``wait`` seconds for a free connection (None: as
        long as it takes); past it, QueryError without running anything."""
        try:
            member = None if self._closed else self._free.get(timeout=wait)
        except queue.Empty:
            busy = psycopg.OperationalError(f"no pooled connection free within {wait}s")
            raise QueryError(query.name, busy) from None
        try:
            if member is None or self._closed:
                closed = psycopg.InterfaceError("the connection pool is closed")
                raise QueryError(query.name, closed)
            return member.run(query, **params)
        finally:
            if member is not None:
                if self._closed:
                    member.close()
                self._free.put(member)

    def shared(self) -> Database:
        """This pool as a bare ``Database``, without ``close``: for a caller that closes
        the database it is handed when done with it (the executor's deadline settler,
        which once had a connection of its own), so it cannot close the pool."""
        return _SharedPool(self)

    def close(self) -> None:
        """Close the idle connections now; one in use closes when its statement ends.
        A statement after this raises QueryError."""
        self._closed = True
        idle = []
        while True:
            try:
                idle.append(self._free.get_nowait())
            except queue.Empty:
                break
        for member in idle:
            member.close()
            self._free.put(member)  # a thread waiting for one wakes and sees closed


@dataclass(frozen=True)
class _SharedPool:
    """A pool that can run statements but not be closed (``DatabasePool.shared``)."""

    pool: DatabasePool

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        return self.pool.run(query, **params)
