"""The connection budget and commit durability of a process (issue 31).

A process's connections are fixed by its roles and settings (docs/operations.md has
the arithmetic): the worker role holds one each for the claim loop, the heartbeat and
the batched acks, ``min(POOL_SIZE, concurrency)`` for its handler threads' writes,
up to one Django connection per handler thread on DATABASE for the job bodies' own
ORM queries (``bodies``: Django's, not the package's, but the server counts them the
same) and, with ``WAKE``, one LISTEN session per alias; the scheduler holds one, the
relay one plus one per other alias it delivers to. Nothing opens more: the pool is
fixed and a broken connection is re-dialled in place.

``server_room`` reads an alias's limits (sql/server.sql). ``budget_problem`` compares
what a process will open with ``max_connections`` minus the superuser slots, the
sessions already open and ``OPERATOR_RESERVE`` left for operators (``jobs stats``, the
admin, psql): when the fleet would take them, the process logs
``jobs.connections.over-budget`` at start and ``manage.py check --database`` warns
(ultimate_jobs.W002). ``durability_problem`` says when an alias commits
asynchronously (``synchronous_commit`` off or local): W003 and
``jobs.database.async-commit``; the relay's own sessions commit synchronously
whatever the server's default (runtime/relay.py, docs/outbox.md).

``refuse_over_budget`` is what ``jobs_worker``, ``jobs_relay`` and ``jobs_scheduler``
do before they open anything (``start_within_budget``, one path): a process
that would cross the budget does not start (``ConnectionBudgetError``,
``X_CONNECTION_BUDGET``, naming the numbers) unless ``--force``, and then only warns.
A process that starts anyway is what takes the operators' last connection and starves
its own acks: refusing is loud at deploy time instead of silent at 3 a.m.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.ground.exceptions import ConfigurationError, QueryError
from ultimate_jobs.sql import QUERIES

logger = logging.getLogger(__name__)

OPERATOR_RESERVE = 3  # connections a fleet leaves to operators on every server
ASYNCHRONOUS = frozenset({"off", "local"})


def process_connections(
    settings: JobsSettings, roles: Sequence[str], concurrency: int | None = None
) -> dict[str, int]:
    """The connections a process running ``roles`` opens to DATABASE, by purpose."""
    threads = concurrency or settings.CONCURRENCY
    held: dict[str, int] = {}
    if "worker" in roles:
        held |= {"worker": 1, "heartbeat": 1, "acks": 1}
        held["pool"] = min(settings.POOL_SIZE, threads)
        held["bodies"] = threads  # a body's ORM query: one Django connection a thread
    if settings.WAKE and roles:
        held["wake"] = 1
    if "scheduler" in roles:
        held["scheduler"] = 1
    if "relay" in roles:
        held["relay"] = 1
    return held


@dataclass(frozen=True)
class ServerRoom:
    """An alias's limits and the sessions open on its server."""

    synchronous_commit: str
    max_connections: int
    superuser_reserved: int
    sessions: int
    ours: dict[str, int] = field(default_factory=dict)

    @property
    def usable(self) -> int:
        """Connections a fleet may hold: max minus superuser slots and the reserve."""
        return self.max_connections - self.superuser_reserved - OPERATOR_RESERVE

    @property
    def fleet(self) -> int:
        """The package's sessions now open on the server."""
        return sum(self.ours.values())


def server_room(alias: str) -> ServerRoom:
    row: dict[str, Any] = DjangoDatabase(alias).run(QUERIES["server_room"])[0]
    ours = row["ours"]
    if isinstance(ours, str | bytes):  # jsonb as text on Django's own cursor
        ours = json.loads(ours)
    return ServerRoom(
        synchronous_commit=str(row["synchronous_commit"]),
        max_connections=int(row["max_connections"]),
        superuser_reserved=int(row["superuser_reserved"]),
        sessions=int(row["sessions"]),
        ours={str(k): int(v) for k, v in dict(ours or {}).items()},
    )


def budget_problem(room: ServerRoom, planned: int, processes: int = 1) -> str | None:
    """Why opening ``planned`` more connections (over ``processes`` processes) leaves
    operators none, or None."""
    if room.sessions + planned <= room.usable:
        return None
    who = (
        "this process opens" if processes == 1 else f"these {processes} processes open"
    )
    return (
        f"{who} {planned} connections and {room.sessions} are open, "
        f"but max_connections={room.max_connections} leaves {room.usable} after "
        f"{room.superuser_reserved} superuser slots and {OPERATOR_RESERVE} for "
        "operators: lower --concurrency/POOL_SIZE, run fewer processes, or raise "
        "max_connections (docs/operations.md, the connection arithmetic)"
    )


def durability_problem(room: ServerRoom) -> str | None:
    """Why an alias's commits may be lost by a crash after they returned, or None."""
    if room.synchronous_commit not in ASYNCHRONOUS:
        return None
    return (
        f"synchronous_commit={room.synchronous_commit}: a commit returns before it is "
        "durable, so a crash of the server can lose an enqueue or a job's outcome that "
        "was already answered; the relay commits its own sessions synchronously, but "
        "the transactions that stage jobs commit as the server says (docs/outbox.md)"
    )


class ConnectionBudgetError(ConfigurationError):
    """A process would take the connections ``max_connections`` leaves operators."""

    code = "X_CONNECTION_BUDGET"


def _room_of(settings: JobsSettings) -> ServerRoom | None:
    """DATABASE's room, read on a session the process does not keep (None: unread)."""
    django_connection = connections[settings.DATABASE]
    was_open = django_connection.connection is not None
    try:
        return server_room(settings.DATABASE)
    except QueryError:
        return None
    finally:
        if not was_open:  # the read's session is not one the process keeps
            django_connection.close()


def refuse_over_budget(
    settings: JobsSettings,
    roles: Sequence[str],
    concurrency: int | None = None,
    *,
    force: bool = False,
    processes: int = 1,
) -> None:
    """Raise ``ConnectionBudgetError`` when a process running ``roles`` (or the
    ``processes`` of a ``--processes`` supervisor, together) would leave operators no
    connection on DATABASE; ``force`` starts it anyway (it then warns). An unreadable
    server refuses nothing: the roles report it."""
    if force:
        return
    planned = processes * sum(
        process_connections(settings, roles, concurrency).values()
    )
    room = _room_of(settings)
    if (
        room is not None
        and (problem := budget_problem(room, planned, processes)) is not None
    ):
        raise ConnectionBudgetError(
            "max_connections",
            room.max_connections,
            f"{problem}; --force starts it anyway",
        )


def warn_at_start(
    settings: JobsSettings, roles: Sequence[str], concurrency: int | None = None
) -> list[str]:
    """Log the budget and durability problems of DATABASE at a process's start;
    answer the event names logged (a failed read logs nothing: the roles report it)."""
    planned = sum(process_connections(settings, roles, concurrency).values())
    room = _room_of(settings)
    if room is None:
        return []
    logged: list[str] = []
    if (problem := budget_problem(room, planned)) is not None:
        logger.warning(
            "jobs.connections.over-budget",
            extra={"alias": settings.DATABASE, "planned": planned, "reason": problem},
        )
        logged.append("jobs.connections.over-budget")
    if (problem := durability_problem(room)) is not None:
        logger.warning(
            "jobs.database.async-commit",
            extra={"alias": settings.DATABASE, "reason": problem},
        )
        logged.append("jobs.database.async-commit")
    return logged
