"""Staging: an enqueue inside a transaction writes outbox rows on the caller's connection.

This module decides, per enqueue, between the two paths of O1/O4 and runs the staging
statement; the relay (relay.py) publishes what committed.

* Inside ``transaction.atomic()`` on the jobs database alias (``DATABASE``), the rows
  go to ``ultimate_jobs_outbox`` through Django's own connection for that alias, so the
  INSERT is part of the caller's transaction: a rollback removes them with the business
  rows, a commit makes them durable even if the process dies the next instant. No
  ``on_commit`` callback is involved; nothing is held in memory.
* Outside a transaction the enqueue publishes directly (``OUTBOX="auto"``) or raises
  ``OutboxNoTx`` (``OUTBOX="required"``). ``OUTBOX="off"`` always publishes directly.

"Inside a transaction" is decided the way Django decides it for ``durable=True``: the
atomic blocks a test case opens around each test (pytest-django's ``django_db``, Django's
``TestCase``) do not count, so a plain enqueue in a test publishes directly, as it would
in production, and an enqueue inside the test's own ``transaction.atomic()`` stages.

Q1: with queues routed to several aliases, the row is staged on the alias the caller's
transaction is open on (the queue's own, else another alias with jobs tables), and the
relay of that alias delivers it into the queue's alias exactly once
(``outbox_deliver``).

The jobs tables (the outbox with them) may live on another alias than the business rows.
A transaction can only be joined on its own connection, so an enqueue made while a
transaction is open on another alias, and none on the jobs alias, is refused with
``OutboxNoTx`` rather than silently published outside it (docs/outbox.md, "Two
databases").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.enqueue.options import Enqueued
from ultimate_jobs.enqueue.rows import Row, array_params, holder_params
from ultimate_jobs.ground.exceptions import JobDuplicate, OutboxNoTx
from ultimate_jobs.sql.rows import JOB_HOLDERS, OUTBOX_STAGE

if TYPE_CHECKING:
    from ultimate_jobs.db import Database

OUTBOX_CHANNEL = "ultimate_jobs_outbox"  # outbox_stage's pg_notify channel (O5)


def in_transaction(connection: Any) -> bool:
    """Answer whether the caller holds a transaction open on ``connection``.

    The atomic blocks a test case opened (``_from_testcase``) are not the caller's. A
    connection that is not connected holds no transaction, so this never connects.
    """
    if connection.atomic_blocks:
        return any(
            not getattr(block, "_from_testcase", False)
            for block in connection.atomic_blocks
        )
    return connection.connection is not None and not connection.autocommit


def staging_alias(settings: JobsSettings, *, job: str, target: str) -> str | None:
    """The alias whose outbox stages an enqueue into ``target``'s queue (O1, O4, Q1),
    or None to publish directly.

    A transaction the caller holds on ``target`` stages there; else one on another
    alias that holds jobs tables (DATABASE first) stages on that alias, and the relay
    delivers the row into ``target`` (Q1). Raises OutboxNoTx for ``OUTBOX="required"``
    outside a transaction, and for an enqueue inside a transaction on an alias that
    holds no jobs tables.
    """
    if settings.OUTBOX == "off":
        return None
    candidates, others = _aliases(settings, target)
    for candidate in candidates:
        if in_transaction(connections[candidate]):
            return candidate
    alias = target
    elsewhere = (
        sorted(
            connection.alias
            for connection in connections.all(initialized_only=True)
            if connection.alias not in candidates and in_transaction(connection)
        )
        if others
        else []
    )
    if elsewhere:
        raise OutboxNoTx(
            f"{job}: enqueued inside a transaction on {', '.join(map(repr, elsewhere))}, "
            f"but the jobs tables live on {alias!r} and a transaction can only be "
            f"joined on its own database. Wrap the enqueue in "
            f"transaction.atomic(using={alias!r}) to stage it with that transaction, "
            f"or set OUTBOX='off' to publish at once (see docs/outbox.md)",
            job=job,
            alias=alias,
            open_on=elsewhere,
        )
    if settings.OUTBOX == "required":
        raise OutboxNoTx(
            f"{job}: OUTBOX='required' and the enqueue ran outside "
            f"transaction.atomic(using={alias!r}); open a transaction around it, or set "
            f"OUTBOX='auto' to publish directly outside one",
            job=job,
            alias=alias,
        )
    return None


# The aliases staging_alias looks at, per target: they change only with the settings
# (one object until ULTIMATE_JOBS changes, conf.py) or DATABASES (issue 26: every
# enqueue asked). Kept with the settings object they were read from, swapped as one
# tuple, so a thread still holding older settings never fills the newer table.
_ALIASES: tuple[JobsSettings | None, dict[str, tuple[tuple[str, ...], bool]]] = (
    None,
    {},
)


def _aliases(settings: JobsSettings, target: str) -> tuple[tuple[str, ...], bool]:
    """``target`` then the other aliases with jobs tables; and whether DATABASES has
    any alias besides those (a transaction there would be refused)."""
    global _ALIASES
    read_from, table = _ALIASES
    if read_from is not settings:
        table = {}
        _ALIASES = (settings, table)
    known = table.get(target)
    if known is None:
        candidates = (target, *(a for a in settings.aliases if a != target))
        others = any(alias not in candidates for alias in connections)
        known = table[target] = (candidates, others)
    return known


@receiver(setting_changed)
def _forget_aliases(*, setting: str, **kwargs: Any) -> None:
    global _ALIASES
    if setting in ("DATABASES", "ULTIMATE_JOBS"):
        _ALIASES = (None, {})


def stage(
    db: Database,
    rows: list[Row],
    *,
    job: str,
    refuse_held: bool = False,
    holders: Database | None = None,
) -> list[Enqueued]:
    """Write ``rows`` to the outbox in the caller's transaction; answer their ids (H1).

    The ids are the job's own: the relay publishes each row under them. Whether a live
    job already holds a row's key is known only at the publish, so a staged enqueue
    answers ``deduped=False``; with ``refuse_held`` (``on_conflict="error"``) a key a
    live job holds at staging raises JobDuplicate before anything is staged.
    """
    if refuse_held:
        held = db.run(JOB_HOLDERS, **holder_params(rows))
        if held:
            first = min(held, key=lambda h: h["ord"])
            raise JobDuplicate(job, rows[first["ord"] - 1].idempotency_key, first["id"])
    db.run(OUTBOX_STAGE, now=None, **array_params(rows))
    return [Enqueued(row.id, row.run_id, deduped=False) for row in rows]
