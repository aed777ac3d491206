"""A connection that falls back on one the process already holds (issue 31).

At ``max_connections`` the server refuses new sessions: after a restart every process
re-dials at once, and the ones that lose the race cannot open their heartbeat's or
their acks' connection. A heartbeat that cannot renew for a lease, or acks that cannot
settle, turn into a lost lease and a body that runs, and completes, twice.

``HeldFallback`` is the heartbeat's and the acks' ``DirectDatabase``: when its own
connection cannot be dialled (the statement never reached the server), the statement
runs instead on the worker's handler pool, a connection the process already holds,
waiting for a free one at most ``wait`` seconds (a third of the lease), so a renewal
or a settle never waits on the pool longer than the lease allows.

A connection that was open can also BREAK (a terminated backend, a network cut): the
statement that failed on it is not run again here (it may have committed; the caller
decides, and the acks and the heartbeat retry fenced statements), but for ``wait``
seconds after the break the statements run on the backup at once instead of waiting
on a re-dial, which on a full server may be refused or hang; then the own connection
is tried again. Both paths hold on ``run`` and on ``hot`` (the acks' door), so the ack
path never waits on its own connection longer than a third of the lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ultimate_jobs.db import DatabasePool, DirectDatabase
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.sql import Query

logger = logging.getLogger(__name__)

R = TypeVar("R")
DIAL = "connect"  # QueryError.query_name of a dial that failed (db.py)


class HeldFallback(DirectDatabase):
    """A ``DirectDatabase`` that runs a statement on ``backup`` when it cannot dial."""

    def __init__(
        self,
        alias: str,
        *,
        application_name: str,
        backup: DatabasePool,
        wait: float,
    ) -> None:
        super().__init__(alias, application_name=application_name)
        self.backup = backup
        self.wait = wait
        self.fallbacks = 0  # statements the backup ran
        self._broke_at: float | None = None  # monotonic time the own connection broke

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        return self._either(super().run, query, params)

    def hot(self, query: Query[R], /, **params: Any) -> list[R]:
        return self._either(super().hot, query, params)

    def _either(
        self,
        own: Callable[..., list[R]],
        query: Query[R],
        params: dict[str, Any],
    ) -> list[R]:
        broke_at = self._broke_at
        if broke_at is not None and time.monotonic() - broke_at < self.wait:
            return self._on_backup(query, params, "broken")
        try:
            rows = own(query, **params)
        except QueryError as exc:
            if exc.query_name == DIAL:  # never reached the server: run it elsewhere
                return self._on_backup(query, params, str(exc))
            if self._conn is None:  # the connection broke (db.py closed it)
                self._broke_at = time.monotonic()
            raise  # it reached the server: never run twice here
        self._broke_at = None
        return rows

    def _on_backup(self, query: Query[R], params: dict[str, Any], why: str) -> list[R]:
        self.fallbacks += 1
        logger.warning(
            "jobs.connection.fallback",
            extra={
                "application_name": self.application_name,
                "query": query.name,
                "error": why,
            },
        )
        return self.backup.run_within(self.wait, query, **params)
