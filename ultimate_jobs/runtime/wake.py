"""LISTEN/NOTIFY wake-up (N1): one listening session per process, fanned out to loops.

Statements that make work due announce it with ``pg_notify(channel, payload)``; the
payload is a queue name (never an id, an input or a tenant: every session on the
channel reads it). This module holds ONE ``LISTEN`` connection per process and calls
the subscribers of each channel with the payload, so a loop that sleeps between polls
(the worker's claim loop, the relay) passes at once instead.

The poll stays the guarantee: a notification is lost with the session that would have
carried it, and a transaction-pooling proxy (PgBouncer ``pool_mode = transaction``)
delivers none. So the wake is PROVEN before anyone relies on it: after each ``LISTEN`` a
probe is sent through a different connection and must come back on the session
(``jobs.wake.live``); until then ``proven`` is False and loops keep their short idle
ceiling. A broken session is re-dialled with backoff (``jobs.wake.lost``).
"""

from __future__ import annotations

import logging
import select
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from ultimate_jobs.db import DirectDatabase

logger = logging.getLogger(__name__)

QUEUE_CHANNEL = "ultimate_jobs_wake"  # payload: a queue name
PROBE_PREFIX = "__probe__:"
PROBE_TIMEOUT = 2.0
# How long the session thread sleeps in select() between looks at its stop flag and
# probe deadline. psycopg's own notifies(timeout) wakes every 100 ms to stay
# interruptible, which cost an idle worker 10 wake-ups a second.
LISTEN_TICK = 1.0

Subscriber = Callable[[str], None]


class Wake:
    """The process's listening session and its subscribers."""

    def __init__(self, alias: str, *, stop: threading.Event | None = None) -> None:
        self.alias = alias
        self.stop_event = stop or threading.Event()
        self.proven = threading.Event()
        self._subscribers: dict[str, list[Subscriber]] = defaultdict(list)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._probe = ""
        self._probe_deadline = 0.0

    def subscribe(self, channel: str, callback: Subscriber) -> None:
        """Call ``callback(payload)`` for every notification on ``channel``."""
        with self._lock:
            self._subscribers[channel].append(callback)

    def announce_local(self, channel: str, payload: str) -> None:
        """Call this process's subscribers of ``channel`` now, without a round trip
        through the database (the relay's publish wakes the worker beside it)."""
        self._dispatch(channel, payload)

    def start(self) -> Wake:
        with self._lock:  # the roles of one process may start it at the same time
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jobs-wake", daemon=True
                )
                self._thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()

    # -- the session -------------------------------------------------------------

    def _run(self) -> None:
        pause = 0.5
        while not self.stop_event.is_set():
            try:
                self._listen()
                pause = 0.5
            except psycopg.Error as exc:
                self.proven.clear()
                logger.warning(
                    "jobs.wake.lost", extra={"error": str(exc), "retry_in": pause}
                )
                self.stop_event.wait(pause)
                pause = min(pause * 2, 10.0)

    def _listen(self) -> None:
        params = DirectDatabase(
            self.alias, application_name="ultimate_jobs wake"
        ).connection_params()
        listened: set[str] = set()
        with psycopg.Connection.connect(autocommit=True, **params) as conn:
            while not self.stop_event.is_set():
                with self._lock:
                    new = [c for c in self._subscribers if c not in listened]
                for channel in new:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    listened.add(channel)
                if new:
                    self._send_probe(params, new[0])
                readable, _, _ = select.select([conn.fileno()], [], [], LISTEN_TICK)
                if readable or new:  # new: a LISTEN's reply may have carried some
                    for note in conn.notifies(timeout=0):
                        self._dispatch(note.channel, note.payload)
                if (
                    self._probe
                    and not self.proven.is_set()
                    and time.monotonic() > self._probe_deadline
                ):
                    self._unverified()

    def _send_probe(self, params: dict[str, Any], channel: str) -> None:
        """Prove the session hears what another connection says (N1)."""
        self.proven.clear()
        self._probe = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        self._probe_deadline = time.monotonic() + PROBE_TIMEOUT
        with psycopg.Connection.connect(autocommit=True, **params) as other:
            other.execute("SELECT pg_notify(%s, %s)", [channel, self._probe])

    def _unverified(self) -> None:
        self._probe = ""
        logger.warning(
            "jobs.wake.unverified",
            extra={
                "fix": "the LISTEN session got no probe back: behind a transaction-pooling "
                "proxy, give workers a direct or session-pooled DATABASE_URL, or set "
                "ULTIMATE_JOBS_WAKE=false; jobs still start on the poll",
            },
        )

    def _dispatch(self, channel: str, payload: str) -> None:
        if payload.startswith(PROBE_PREFIX):
            if payload == self._probe and not self.proven.is_set():
                self.proven.set()
                logger.info("jobs.wake.live", extra={"channel": channel})
            return
        with self._lock:
            callbacks = list(self._subscribers.get(channel, ()))
        for callback in callbacks:
            try:
                callback(payload)
            except Exception:
                logger.exception(
                    "jobs.wake.subscriber-failed", extra={"channel": channel}
                )
