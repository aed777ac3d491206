"""What the queues hold and which workers are alive, read for scrapes and probes.

The Prometheus queue gauges (metrics.py) and the readiness check (health.py) both read
through here, with one grouped statement each (sql/stats.sql), never one per queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from ultimate_jobs.db import Database
from ultimate_jobs.sql import QUERIES


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue at the time of the read."""

    queue: str
    depth: int = 0  # jobs due and waiting for a worker
    oldest_ready_seconds: float = 0.0  # how long the longest-waiting one has been due
    running: int = 0  # claimed, lease held
    dead: int = 0  # dead letters, in the hot table and the archive (Q2)
    oldest_dead_seconds: float = 0.0  # how long ago the earliest of them died

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """A worker whose registry row has not expired (W8)."""

    id: str
    queues: tuple[str, ...]
    heartbeat_at: datetime
    slots: int = 0  # handler threads
    abandoned: int = 0  # of them, held by bodies past their timeout (lost capacity)

    @property
    def usable(self) -> int:
        """The slots that can still run a job."""
        return max(self.slots - self.abandoned, 0)


def queue_health(
    db: Database,
    *,
    queues: Sequence[str] | None = None,
    known: Iterable[str] = (),
    now: datetime | None = None,
) -> list[QueueStats]:
    """Every queue with waiting, running or dead jobs, plus ``known`` ones at zero.

    ``queues`` restricts the read to those queues (None: every queue). ``known`` names
    queues to report even when empty, so a gauge reads 0 instead of vanishing.
    """
    rows = db.run(
        QUERIES["queue_health"], queues=list(queues) if queues else None, now=now
    )
    found = {
        row["queue"]: QueueStats(
            queue=row["queue"],
            depth=int(row["depth"]),
            oldest_ready_seconds=max(float(row["oldest_ready_seconds"]), 0.0),
            running=int(row["running"]),
            dead=int(row["dead"]),
            oldest_dead_seconds=max(float(row["oldest_dead_seconds"]), 0.0),
        )
        for row in rows
    }
    wanted = set(known) if not queues else set(known) & set(queues)
    for name in wanted - found.keys():
        found[name] = QueueStats(queue=name)
    return [found[name] for name in sorted(found)]


def live_workers(db: Database, *, now: datetime | None = None) -> list[LiveWorker]:
    """The workers whose registry row has not expired."""
    return [
        LiveWorker(
            id=row["id"],
            queues=tuple(row["queues"] or ()),
            heartbeat_at=row["heartbeat_at"],
            slots=int(row["slots"]),
            abandoned=int(row["abandoned"]),
        )
        for row in db.run(QUERIES["worker_live"], now=now)
    ]
