"""The event bus on PostgreSQL (S4): ``publish_event`` and what waits read.

A publication is a row in ``ultimate_jobs_event``, stamped by the database's clock (the
bus has ONE clock, so no process's own clock decides which answers count) and matchable
until it expires (``EVENT_RETENTION``, 7 days by default, or ``retention=``). A
``run.wait_for_event`` matches the earliest unexpired event of its name and of the job's
tenant whose payload contains its ``match``, published at or after the job was enqueued
and not consumed by another wait of the job, so an answer published before the body
reached its wait is not lost.

``publish_event`` runs on the caller's connection, inside the caller's transaction when
there is one (the event exists when that commits), and wakes the matching suspended
runs in the same statement: they become due at once and their queue's workers are
notified, so a run resumes within milliseconds rather than at its next ``event_poll``.
A second statement, with a fresh snapshot, wakes the waits that raced the first (see
sql/events.sql); waits still running are never locked, so a long transaction around a
publication cannot hold up their workers' heartbeats. ``event_poll`` stays the
guarantee behind the wake.

With queues on several aliases (Q1) every alias holds its own event table, read by the
waits of the jobs it holds: a publication is written on ``DATABASE`` in the caller's
transaction, and on each other alias once that commits (at once outside a
transaction), so a rolled-back publication reaches no alias.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.definition import NoTenant
from ultimate_jobs.durable.record import check_name
from ultimate_jobs.ground.bounds import json_problem, text_problem
from ultimate_jobs.ground.context import current_tenant
from ultimate_jobs.ground.durations import Duration, parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.sql import QUERIES

PURGE_BATCH = 1000


class _CurrentTenant:
    def __repr__(self) -> str:
        return "CURRENT_TENANT"


CURRENT_TENANT: Any = _CurrentTenant()


@dataclass(frozen=True, slots=True)
class Published:
    """What a publication answers: the event's id and how many suspended runs it woke."""

    id: int
    woken: int


def _tenant(tenant: object) -> str | None:
    if tenant is CURRENT_TENANT:
        return current_tenant()
    if tenant is None or isinstance(tenant, NoTenant):
        return None
    if isinstance(tenant, int) and not isinstance(tenant, bool):
        tenant = str(tenant)
    if (
        not isinstance(tenant, str)
        or not tenant
        or len(tenant) > 200
        or text_problem(tenant) is not None
    ):
        raise InvalidArgument(
            "tenant", tenant, "a tenant id (a non-empty string), None or NO_TENANT"
        )
    return tenant


def _payload(payload: object) -> str:
    if payload is None:
        return "{}"
    if not isinstance(payload, Mapping):
        raise InvalidArgument(
            "payload", payload, "a dict (waits match keys it contains)"
        )
    settings = get_settings()
    found = json_problem(
        dict(payload),
        max_depth=settings.MAX_INPUT_DEPTH,
        max_bytes=settings.MAX_INPUT_BYTES,
    )
    if found is not None:  # B4: refused before the statement, like a job's input
        raise InvalidArgument(
            f"payload.{found.path}" if found.path else "payload",
            found.value,
            found.reason,
        )
    try:
        return json.dumps(dict(payload), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("payload", payload, f"not JSON: {exc}") from None


def publish_event(
    event: str,
    payload: Mapping[str, Any] | None = None,
    *,
    tenant: Any = CURRENT_TENANT,
    retention: Duration | None = None,
) -> Published:
    """Publish ``event`` with a JSON ``payload`` and wake the runs waiting for it (S4).

    ``tenant`` defaults to ``current_tenant()`` (the running job's tenant inside a job
    body; None elsewhere unless the app set one); a wait only sees events of its own
    job's tenant. ``retention`` overrides how long the event stays matchable.
    """
    name = check_name(event, "event")
    encoded = _payload(payload)
    tenant_id = _tenant(tenant)
    settings = get_settings()
    seconds = (
        settings.EVENT_RETENTION
        if retention is None
        else parse_duration(retention, field="retention")
    )
    publish = {"name": name, "payload": encoded, "tenant_id": tenant_id}
    first = _publish(settings.DATABASE, retention=seconds, **publish)
    others = settings.aliases[1:]
    if not others:
        return first
    if connections[settings.DATABASE].in_atomic_block:
        # Q1: the other aliases get it once the caller's transaction commits.
        transaction.on_commit(
            lambda: [_publish(a, retention=seconds, **publish) for a in others],
            using=settings.DATABASE,
        )
        return first
    woken = sum(_publish(a, retention=seconds, **publish).woken for a in others)
    return Published(id=first.id, woken=first.woken + woken)


def _publish(alias: str, **params: Any) -> Published:
    """One alias's publication and wake; ``id`` is that alias's event row."""
    db = DjangoDatabase(alias)
    [row] = db.run(QUERIES["event_publish"], now=None, **params)
    # A fresh snapshot (READ COMMITTED) for the waits that raced the first statement.
    [late] = db.run(QUERIES["event_wake"], id=row["id"], now=None)
    return Published(id=row["id"], woken=row["woken"] + late["woken"])


def purge_expired_events(
    limit: int = PURGE_BATCH, *, now: Any = None, alias: str | None = None
) -> int:
    """Delete up to ``limit`` expired events of ``alias`` (DATABASE by default);
    answers how many went (for the purge)."""
    rows = DjangoDatabase(alias or get_settings().DATABASE).run(
        QUERIES["event_purge"], limit=limit, now=now
    )
    return len(rows)


def reset_events() -> int:
    """Delete every event: the seam between tests that share a database (answers how
    many went). An event stays matchable until it expires, so one test's publication
    would otherwise answer the next test's wait. Not for production."""
    return sum(
        len(DjangoDatabase(alias).run(QUERIES["event_reset"]))
        for alias in get_settings().aliases
    )
