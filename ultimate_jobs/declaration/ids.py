"""Time-ordered ids (UUIDv7, RFC 9562), so ORDER BY id follows enqueue order."""

from __future__ import annotations

import os
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
    one read of the random source for the lot (an ``enqueue_many`` needs two a job)."""
    global _last_ms, _counter
    entropy = os.urandom(8 * count)
    values = []
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        for _ in range(count):
            if now_ms > _last_ms:
                _last_ms = now_ms
                _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF  # headroom
            else:
                _counter += 1
                if _counter > 0xFFF:
                    _last_ms += 1
                    _counter = 0
            values.append(((_last_ms & _MS_MASK) << 80) | (_counter << 64))
    return [
        uuid.UUID(
            int=value
            | _VERSION_AND_VARIANT
            | (int.from_bytes(entropy[8 * i : 8 * i + 8], "big") & _RAND_B_MASK)
        )
        for i, value in enumerate(values)
    ]
