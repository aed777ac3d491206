"""A worker's claim round by hand, for tests that claim without a worker.

``job_stage`` owns every time-driven move (due delayed and suspended rows, lapsed
leases, burial at the final attempt, W5) and both claims take 'ready' rows only, so a
test that claims by hand stages first, as the claimer does (runtime/claimer.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ultimate_jobs import registry
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.limits.budgets import claim_parameters
from ultimate_jobs.runtime.rides import NO_RIDE
from ultimate_jobs.sql import QUERIES, Query
from ultimate_jobs.sql.rows import JOB_CLAIM, JOB_STAGE, ClaimedJob, Staged


def stage_params(
    queues: Sequence[str], now: datetime | None, dropped: Sequence[str] = ()
) -> dict[str, Any]:
    """The parameters of one staging pass over ``queues`` at ``now``."""
    return {
        "queues": list(queues),
        "limit": 500,
        "dropped": list(dropped),
        "names": [],
        "registry": None,  # no worker's registry row rides along (issue 26)
        "registry_lease": 30.0,
        **NO_RIDE,  # nor a leader lease, nor an outbox look (issue 26)
        "now": now,
    }


def claim_params(
    *,
    queues: Sequence[str] = ("default",),
    limit: int = 10,
    worker_id: str = "w-test",
    lease_seconds: float = 30.0,
    names: list[str] | None = None,
    now: datetime | None = None,
    jobs: Registry = registry,
    **rooms: Any,
) -> dict[str, Any]:
    """The parameters of the limited claim (job_claim): fleet caps, then ``rooms``."""
    return {
        "queues": list(queues),
        "limit": limit,
        "worker_id": worker_id,
        "lease_seconds": lease_seconds,
        "names": names,
        "now": now,
        **claim_parameters(jobs),
        **rooms,
    }


def stage(
    db: Any, queues: Sequence[str] = ("default",), now: datetime | None = None
) -> list[Staged]:
    rows: list[Staged] = db.run(JOB_STAGE, **stage_params(queues, now))
    return rows


def claim(db: Any, **params: Any) -> list[ClaimedJob]:
    """Stage, then claim with job_claim on ``db`` (a Database); see ``claim_params``."""
    values = claim_params(**params)
    stage(db, values["queues"], values["now"])
    rows: list[ClaimedJob] = db.run(JOB_CLAIM, **values)
    return rows


def claim_on(connection: Any, **params: Any) -> list[Any]:
    """The same on a raw psycopg connection (another session); answers tuples."""
    values = claim_params(**params)
    connection.execute(
        QUERIES["job_stage"].text, stage_params(values["queues"], values["now"])
    )
    return list(connection.execute(QUERIES["job_claim"].text, values).fetchall())


class Counting(DirectDatabase):
    """Runs every statement for real and notes its name: the statements sent."""

    def __init__(self, alias: str, sent: list[str]) -> None:
        super().__init__(alias)
        self.sent = sent

    def run(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.sent.append(query.name)
        return super().run(query, **params)

    def hot(self, query: Query[Any], /, **params: Any) -> list[Any]:
        self.sent.append(query.name)
        return super().hot(query, **params)
