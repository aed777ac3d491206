"""Time-ordered ids (UUIDv7, RFC 9562), so ORDER BY id follows enqueue order."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

_MS_MASK = (1 << 48) - 1
_RAND_B_MASK = (1 << 62) - 1
_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """Answer a UUIDv7; ids made in one process are strictly increasing.

    48 bits of Unix milliseconds, then a 12-bit counter (rand_a) that orders ids made
    within one millisecond, then 62 random bits. When the counter overflows, the
    timestamp is advanced by one millisecond rather than letting the order break.
    """
    return uuid7s(1)[0]


def uuid7s(count: int) -> list[uuid.UUID]:
    """Answer ``count`` UUIDv7s in increasing order: one clock reading, one lock and
    one read of the random source for the lot (an ``enqueue_many`` needs two a job).

    The millisecond and the counter read together are one 60-bit sequence number (a
    counter overflow carries into the millisecond), so the batch takes ``count``
    consecutive numbers of it."""
    global _last_ms, _counter
    entropy = os.urandom(8 * count)
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            first = (now_ms << 12) | (int.from_bytes(os.urandom(2), "big") & 0x3FF)
        else:
            first = ((_last_ms << 12) | _counter) + 1
        last = first + count - 1
        _last_ms, _counter = last >> 12, last & 0xFFF
    randoms = memoryview(entropy).cast("Q")  # native order: still 64 random bits each
    return [
        _from_int(
            ((sequence >> 12 & _MS_MASK) << 80)
            | ((sequence & 0xFFF) << 64)
            | _VERSION_AND_VARIANT
            | (random & _RAND_B_MASK)
        )
        for sequence, random in zip(range(first, last + 1), randoms, strict=True)
    ]


def _from_int(value: int) -> uuid.UUID:
    """A UUID of a 128-bit value built here (always valid): without the argument
    checks of ``uuid.UUID(int=...)``, a third of the cost of an id."""
    made = _new(_UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made


_new = object.__new__
_set = object.__setattr__
_UUID = uuid.UUID
_UNKNOWN = uuid.SafeUUID.unknown


def process_name() -> str:
    """This process as a lease holder or relay names it: host, process id and six random
    hex digits, so two loops of one process never share a name."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
