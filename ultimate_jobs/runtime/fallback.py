"""A connection that falls back on one the process already holds (issue 31).

At ``max_connections`` the server refuses new sessions: after a restart every process
re-dials at once, and the ones that lose the race cannot open their heartbeat's or
their acks' connection. A heartbeat that cannot renew for a lease, or acks that cannot
settle, turn into a lost lease and a body that runs, and completes, twice.

``HeldFallback`` is the heartbeat's and the acks' ``DirectDatabase``: when its own
connection cannot be dialled (the statement never reached the server), the statement
runs instead on the worker's handler pool, a connection the process already holds,
waiting for a free one at most ``wait`` seconds (a third of the lease), so a renewal
or a settle never waits on the pool longer than the lease allows. A statement that
failed on a connection that was open is not run again (it may have committed); only
a refused dial falls back.
"""

from __future__ import annotations

import logging
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

    def run(self, query: Query[R], /, **params: Any) -> list[R]:
        try:
            return super().run(query, **params)
        except QueryError as exc:
            if exc.query_name != DIAL:
                raise  # it reached the server: never run twice
            self.fallbacks += 1
            logger.warning(
                "jobs.connection.fallback",
                extra={
                    "application_name": self.application_name,
                    "query": query.name,
                    "error": str(exc),
                },
            )
            return self.backup.run_within(self.wait, query, **params)
