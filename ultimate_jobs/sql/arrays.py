"""Array parameters already in PostgreSQL's binary array format (H3, issue 13).

A batch of job rows travels as one array per column (the ``job_input`` fragment of
jobs.sql). psycopg's list dumpers build each array element by element in Python,
and in text form they search every element for characters to quote: at 1,000 rows
that was a third of an ``enqueue_many``'s client time. Here each column is packed
in one pass into the binary array format (a header, then each element as its length
and bytes), so the server reads it without parsing quotes, and a value repeated
down a column (the job name, the queue) is encoded once.

``BinaryArray`` keeps its values too: a statement run through Django's own cursor
(which binds parameters into the text on the client, when queries are logged)
passes them as a plain list (``plain``).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from psycopg import adapt, pq

_INT = struct.Struct(">i")
_HEADER = struct.Struct(
    ">iiiii"
)  # dimensions, has-null, element oid, size, lower bound
_EMPTY = struct.Struct(">iii")
_NULL = _INT.pack(-1)
_UUID_CHUNK = _INT.pack(16)

# Element and array oids (pg_type).
UUID = (2950, 2951)
TEXT = (25, 1009)
JSONB = (3802, 3807)
INT2 = (21, 1005)
INT4 = (23, 1007)
FLOAT8 = (701, 1022)


@dataclass(frozen=True, slots=True)
class BinaryArray:
    """One array parameter: its binary form (``data``, of type ``oid``) and the values
    it was made from."""

    oid: int
    data: bytes
    values: Sequence[Any]


def _pack(
    kind: tuple[int, int], values: Sequence[Any], chunk: Callable[[Any], bytes]
) -> BinaryArray:
    """Pack ``values`` with ``chunk`` (a value's length and bytes); NULL for None."""
    element, array = kind
    if not values:
        return BinaryArray(array, _EMPTY.pack(0, 0, element), values)
    first, size = values[0], len(values)
    if values[-1] == first and values.count(first) == size:
        # One value down the whole column (the name, the queue, a NULL): its bytes
        # repeated, without a lookup per element. Equal values are encoded alike,
        # as the memo below does.
        if first is None:
            return BinaryArray(
                array, _HEADER.pack(1, 1, element, size, 1) + _NULL * size, values
            )
        header = _HEADER.pack(1, 0, element, size, 1)
        return BinaryArray(array, header + chunk(first) * size, values)
    memo: dict[Any, bytes] = {}
    parts = []
    has_null = 0
    for value in values:
        if value is None:
            has_null = 1
            parts.append(_NULL)
            continue
        try:  # a value repeated down the column is encoded once
            part = memo[value]
        except KeyError:
            part = memo[value] = chunk(value)
        parts.append(part)
    header = _HEADER.pack(1, has_null, element, len(values), 1)
    return BinaryArray(array, header + b"".join(parts), values)


def _text_chunk(value: str) -> bytes:
    data = value.encode()
    return _INT.pack(len(data)) + data


def uuids(values: Sequence[uuid.UUID | None]) -> BinaryArray:
    """A uuid[]; each id is distinct, so no memo. (A NULL is looked for only when
    one is met: ``None in values`` would call UUID.__eq__, in Python, per element.)"""
    present = cast(Sequence[uuid.UUID], values)
    try:
        body = b"".join([_UUID_CHUNK + value.bytes for value in present])
    except AttributeError:  # a None among them
        body = b""
    if not values or not body:
        return _pack(UUID, values, lambda value: _UUID_CHUNK + value.bytes)
    header = _HEADER.pack(1, 0, UUID[0], len(values), 1)
    return BinaryArray(UUID[1], header + body, values)


def texts(values: Sequence[str | None]) -> BinaryArray:
    """A text[]; the strings are UTF-8 (the connection's encoding, B4 refuses NUL)."""
    return _pack(TEXT, values, _text_chunk)


def unique_texts(values: Sequence[str | None]) -> BinaryArray:
    """A text[] of values that rarely repeat (keys, payloads): no memo."""
    if not values or None in values:
        return texts(values)
    encoded = [value.encode() for value in cast(Sequence[str], values)]
    body = b"".join([_INT.pack(len(data)) + data for data in encoded])
    header = _HEADER.pack(1, 0, TEXT[0], len(values), 1)
    return BinaryArray(TEXT[1], header + body, values)


def jsonbs(values: Sequence[str | None]) -> BinaryArray:
    """A jsonb[] of JSON texts (binary jsonb is a version byte, 1, then the text)."""
    if not values or None in values:
        return _pack(JSONB, values, lambda value: _text_chunk("\x01" + value))
    encoded = [value.encode() for value in cast(Sequence[str], values)]
    body = b"".join([_INT.pack(len(data) + 1) + b"\x01" + data for data in encoded])
    header = _HEADER.pack(1, 0, JSONB[0], len(values), 1)
    return BinaryArray(JSONB[1], header + body, values)


def smallints(values: Sequence[int | None]) -> BinaryArray:
    return _pack(
        INT2, values, lambda value: b"\x00\x00\x00\x02" + struct.pack(">h", value)
    )


def integers(values: Sequence[int | None]) -> BinaryArray:
    return _pack(
        INT4, values, lambda value: b"\x00\x00\x00\x04" + struct.pack(">i", value)
    )


def doubles(values: Sequence[float | None]) -> BinaryArray:
    return _pack(
        FLOAT8, values, lambda value: b"\x00\x00\x00\x08" + struct.pack(">d", value)
    )


def timestamps(values: Sequence[datetime.datetime | None]) -> BinaryArray:
    """Instants as a text[] of ISO 8601 texts, for a ``::timestamptz[]`` cast. An aware
    one is written in UTC (PostgreSQL reads no offset past 15:59, Python allows 24 h);
    a naive one is read in the session's time zone, as a ``timestamp`` parameter is."""
    return _pack(TEXT, values, lambda value: _text_chunk(iso(value)))


def iso(value: datetime.datetime) -> str:
    """An instant as the ISO 8601 text a ``::timestamptz`` cast reads (see timestamps)."""
    if value.tzinfo is not None and value.utcoffset() is not None:
        value = value.astimezone(datetime.UTC)
    return value.isoformat()


class BinaryArrayDumper(adapt.Dumper):
    """Sends a BinaryArray as it is, typed with its own oid."""

    format = pq.Format.BINARY

    def get_key(self, obj: Any, format: adapt.PyFormat) -> Any:
        return (BinaryArray, obj.oid)

    def upgrade(self, obj: Any, format: adapt.PyFormat) -> adapt.Dumper:
        dumper = BinaryArrayDumper(BinaryArray)
        dumper.oid = obj.oid
        return dumper

    def dump(self, obj: BinaryArray) -> bytes:
        return obj.data


def register(adapters: adapt.AdaptersMap) -> None:
    """Let a connection (or cursor) send BinaryArray parameters."""
    adapters.register_dumper(BinaryArray, BinaryArrayDumper)


def plain(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters with each BinaryArray as the list it was made from."""
    return {
        name: list(value.values) if isinstance(value, BinaryArray) else value
        for name, value in params.items()
    }


register(psycopg.adapters)  # connections made from now on (a test's own) inherit it
