"""Time-ordered ids (UUIDv7, RFC 9562), so ORDER BY id follows enqueue order."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """Answer a UUIDv7; ids made in one process are strictly increasing.

    48 bits of Unix milliseconds, then a 12-bit counter (rand_a) that orders ids made
    within one millisecond, then 62 random bits. When the counter overflows, the
    timestamp is advanced by one millisecond rather than letting the order break.
    """
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms = now_ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF  # leave headroom
        else:
            _counter += 1
            if _counter > 0xFFF:
                _last_ms += 1
                _counter = 0
        ms, counter = _last_ms, _counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand_b
    return uuid.UUID(int=value)
