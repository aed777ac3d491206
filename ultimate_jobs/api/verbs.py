"""Operator verbs shared by the admin, ``manage.py jobs`` and Python callers (P2, L4).

Each verb runs one fenced statement and, when it moves nothing, reads the row once to
say exactly why (not found, live, running, or a key a live job holds).

Who did it (P2): ``retry``, ``cancel``, ``remove`` and ``promote`` take ``actor`` (a
Django user, an ``Operator``, or a name) and record it, in the same transaction as
the move, as a ``JobAction`` row: action, actor id and display name, the surface
(``admin``, ``cli``, ``api``), the reason, the time. It outlives the job (a removal
is recorded too) and is shown in the admin and in ``jobs show --json``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from django.db import transaction

from ultimate_jobs.api.locator import alias_of, load
from ultimate_jobs.api.reads import parse_job_id
from ultimate_jobs.conf import get_settings, queue_alias, reading_aliases
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.definition import MAX_KEY_LENGTH
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobDuplicate,
    JobNotCancellable,
    JobNotPromotable,
    JobNotRemovable,
    JobNotRequeueable,
    QueryError,
)
from ultimate_jobs.ground.ids import uuid7
from ultimate_jobs.ground.signals import job_cancelled
from ultimate_jobs.models import (
    FINISHED_STATES,
    Job,
    JobAction,
    JobArchive,
    JobStep,
    OutboxMessage,
    QueuePause,
    StepKind,
)
from ultimate_jobs.observability.redaction import shown_row
from ultimate_jobs.observability.triage import check_fingerprint
from ultimate_jobs.runtime.parents import wake_away_parents
from ultimate_jobs.sql import QUERIES

# cancel_by_key(tenant=...) left out: any tenant, as long as only one holds the key.
ANY_TENANT: object = object()


def _db(alias: str) -> DjangoDatabase:
    return DjangoDatabase(alias)


MAX_ACTOR_LENGTH = 255
MAX_REASON_LENGTH = 1000


@dataclass(frozen=True, slots=True)
class Operator:
    """Who moved a job: an id, a display name, and the surface they used."""

    id: str = ""
    name: str = ""
    source: str = "api"  # admin | cli | api

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "source": self.source}


def operator_of(actor: Any, *, source: str = "api") -> Operator:
    """The Operator of ``actor``: a Django user (its pk and display name), an
    Operator, a name, or None (nobody named). Refused past its column or with a NUL."""
    if actor is None:
        return Operator(source=source)
    if isinstance(actor, Operator):
        found = actor
    elif isinstance(actor, str):
        found = Operator(actor, actor, source)
    else:
        pk = getattr(actor, "pk", None)
        full = getattr(actor, "get_full_name", None)
        username = getattr(actor, "get_username", None)
        name = (full() if callable(full) else "") or (
            username() if callable(username) else str(actor)
        )
        found = Operator("" if pk is None else str(pk), str(name), source)
    for field, value in (("actor.id", found.id), ("actor.name", found.name)):
        check_text(value, field=field, max_length=MAX_ACTOR_LENGTH)
    return found


def _record(
    job: Job | JobArchive | None,
    pk: uuid.UUID,
    action: str,
    who: Operator,
    reason: str,
    alias: str,
) -> None:
    JobAction.objects.using(alias).create(
        job_id=pk,
        job_name=job.name if job is not None else "",
        action=action,
        actor_id=who.id,
        actor_name=who.name,
        source=who.source,
        reason=reason,
    )


def _name_of(pk: uuid.UUID, alias: str) -> Job | None:
    found = Job.objects.using(alias).filter(pk=pk)
    return found.only("name").first()


def retry(
    job_id: object, *, from_step: str | None = None, actor: Any = None
) -> uuid.UUID:
    """Requeue one finished job as a fresh run (attempt 0, due now); answers its run id.

    Its completed steps replay from storage; ``from_step`` drops that step and every
    later one first, so they run again (P2). A job in the archive (Q2) is moved back to
    the hot table with its steps, attempts and logs in the same transaction. A live job is JobNotRequeueable; one whose
    key a live job now holds is JobDuplicate. ``actor`` is recorded (see the module).
    """
    pk = parse_job_id(job_id)
    who = operator_of(actor)
    if from_step is not None:
        check_text(from_step, field="from_step", max_length=200)
    return _retry(pk, from_step, who, alias_of(pk))  # Q1: where the job is


def _retry(
    pk: uuid.UUID, from_step: str | None, who: Operator, alias: str
) -> uuid.UUID:
    with transaction.atomic(using=alias):
        # Q2: a job in the archive moves back to the hot table first, with its
        # steps; a refused retry rolls the move back with it.
        _db(alias).run(QUERIES["archive_restore"], id=pk)
        if from_step is None:
            run_id = _requeue(pk, alias)
        else:
            dropped = _db(alias).run(
                QUERIES["step_drop_from"], job_id=pk, name=from_step
            )
            run_id = _requeue(pk, alias)  # refused: the drop rolls back with it
            if not dropped:
                raise InvalidArgument(
                    "from_step", from_step, "the job has no such step"
                )
        reason = f"from step {from_step!r}" if from_step is not None else ""
        _record(_name_of(pk, alias), pk, "retry", who, reason, alias)
    return run_id


def _requeue(pk: uuid.UUID, alias: str) -> uuid.UUID:
    run_id = uuid7()
    try:
        # A savepoint when the caller holds a transaction: a refused requeue leaves
        # it usable for the reads that say why.
        with transaction.atomic(using=alias):
            rows = _db(alias).run(
                QUERIES["job_requeue"], id=pk, run_id=run_id, now=None
            )
    except QueryError as exc:
        if _unique_violation(exc):
            job = load(pk, alias=alias)
            raise JobDuplicate(
                job.name, shown_row(job).key(job.idempotency_key), None
            ) from exc
        raise
    if rows:
        return run_id
    job = load(pk, alias=alias)
    if job.state not in FINISHED_STATES:
        raise JobNotRequeueable(pk, job.state)
    raise JobDuplicate(
        job.name, shown_row(job).key(job.idempotency_key), _live_holder(job, alias)
    )


def _unique_violation(error: BaseException) -> bool:
    """Whether the driver error behind ``error`` is a unique violation (23505): told
    by its type, through Django's wrapper, never by its message."""
    cause = error.__cause__
    while cause is not None:
        if isinstance(cause, psycopg.errors.UniqueViolation):
            return True
        cause = cause.__cause__
    return False


def _live_holder(job: Job, alias: str) -> uuid.UUID | None:
    holder = (
        Job.objects.using(alias)
        .filter(
            name=job.name, tenant_id=job.tenant_id, idempotency_key=job.idempotency_key
        )
        .exclude(state__in=FINISHED_STATES)
        .values_list("id", flat=True)
        .first()
    )
    return holder


def cancel(job_id: object, reason: str = "", *, actor: Any = None) -> None:
    """Cancel one live job: a queued one at once, a running one at its next heartbeat.
    ``actor`` is recorded (see the module)."""
    pk = parse_job_id(job_id)
    who = operator_of(actor)
    text = check_text(
        reason[:MAX_REASON_LENGTH], field="reason", max_length=MAX_REASON_LENGTH
    )
    if _cancel(pk, text, who) is None:
        raise JobNotCancellable(pk, load(pk).state)


CHILDREN_PAGE = 500


def _cancel(pk: uuid.UUID, reason: str, who: Operator) -> str | None:
    """Cancel one live job on whichever alias holds it (Q1), record who did it, and
    tell ``job_cancelled`` (P4); answers the state it was cancelled from, or None when
    it was not live."""
    alias = alias_of(pk)
    with transaction.atomic(using=alias):
        rows = _db(alias).run(QUERIES["job_cancel"], id=pk, reason=reason, now=None)
        if not rows:
            return None
        _record(_name_of(pk, alias), pk, "cancel", who, reason, alias)
    row = rows[0]
    sender = registry.get(row["name"]) if row["name"] in registry else None
    job_cancelled.send(
        sender=sender,
        job_id=pk,
        name=row["name"],
        state=row["was"],
        reason=reason,
    )
    if row["parent_id"] is not None and len(reading_aliases()) > 1:
        _wake_parent_elsewhere(row["parent_id"], alias)
    _cancel_children(pk, alias, who)
    return str(row["was"])


def _wake_parent_elsewhere(parent: uuid.UUID, alias: str) -> None:
    """S11, Q1: a child cancelled on ``alias`` whose ``parent`` lives on another alias
    wakes it there when it was its last live child here, as a worker's settle does (no
    trigger crosses databases); best-effort, the parent's event_poll stays the
    guarantee (runtime/parents.py)."""
    if Job.objects.using(alias).filter(pk=parent).exists():
        return  # the parent is on this alias: the trigger wakes it
    wake_away_parents(_db(alias), alias, [parent])


def _cancel_children(pk: uuid.UUID, alias: str, who: Operator) -> None:
    """S11: cancelling a parent cancels its live children (and theirs), each recorded
    like an operator's cancel, in pages of the live-children index."""
    reason = f"parent {pk} cancelled"
    while children := _db(alias).run(
        QUERIES["children_live"], parent_id=pk, limit=CHILDREN_PAGE
    ):
        cancelled = [_cancel(child["id"], reason, who) for child in children]
        if all(was is None for was in cancelled):
            break  # none of them could be cancelled any more: nothing changes
    if len(reading_aliases()) > 1:
        for child in _spawned_elsewhere(pk, alias):
            _cancel(child, reason, who)


def _forestall_staged(children: list[uuid.UUID], alias: str) -> list[uuid.UUID]:
    """S11 for children still staged in ``alias``'s outbox for another alias (Q1): the
    relay must never publish them (child_forestall takes their receipts on their
    queue's alias); answers the children it could not stop, which were delivered
    meanwhile and are cancelled as jobs."""
    staged = OutboxMessage.objects.using(alias).filter(
        pk__in=children, published_at__isnull=True
    )
    targets: dict[str, list[uuid.UUID]] = {}
    for child, queue in staged.values_list("pk", "queue"):
        targets.setdefault(get_settings().database_for(queue), []).append(child)
    stopped: set[uuid.UUID] = set()
    for target, ids in targets.items():
        rows = _db(target).run(QUERIES["child_forestall"], ids=ids)
        stopped.update(row["id"] for row in rows)
    return [child for child in children if child not in stopped]


def _spawned_elsewhere(pk: uuid.UUID, alias: str) -> list[uuid.UUID]:
    """The children ``pk`` spawned on another alias (Q1), found by the parent's spawn
    steps: those the relay has published (with parent_id) and those still staged in
    this alias's outbox, which must never be published (not those that answered an
    existing job's key: that job is not the parent's to cancel)."""
    outputs = JobStep.objects.using(alias).filter(
        job_id=pk, kind=StepKind.SPAWN, archived=False
    )
    found = [
        uuid.UUID(o["id"])
        for o in outputs.values_list("output", flat=True)
        if isinstance(o, dict) and not o.get("deduped")
    ]
    here = set(
        Job.objects.using(alias).filter(pk__in=found).values_list("pk", flat=True)
    )
    return _forestall_staged([child for child in found if child not in here], alias)


def cancel_by_key(
    name: object,
    key: object,
    *,
    tenant: str | object | None = ANY_TENANT,
    reason: str = "",
    actor: Any = None,
) -> uuid.UUID | None:
    """Cancel the live job of ``name`` that holds idempotency key ``key``, wherever it
    is (ready, delayed, suspended, or running: stopped at its next heartbeat); answers
    its id, or None when no live job holds the key (seed ``cancelByKey``).

    It is the disarm half of a keyed enqueue: a job that reschedules itself (S5) keeps
    its id and key, so this ends the whole sequence. ``name`` is a job name or its
    handle. A key is held per tenant (J2): ``tenant`` names one (None: the job has no
    tenant); left out, the key must be held under one tenant only, else the call is
    refused (InvalidArgument on ``tenant``) and nothing is cancelled. ``actor`` is
    recorded, as by ``cancel``.
    """
    job_name = getattr(name, "name", name)
    if not isinstance(job_name, str) or not job_name or len(job_name) > 200:
        raise InvalidArgument(
            "name", name, "a job name (or handle) of at most 200 characters"
        )
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidArgument(
            "key",
            key,
            f"a non-empty idempotency key of at most {MAX_KEY_LENGTH} characters",
        )
    if tenant is not ANY_TENANT and tenant is not None and not isinstance(tenant, str):
        raise InvalidArgument("tenant", tenant, "a tenant id, or None for no tenant")
    # B4: a NUL or a lone surrogate is refused here, not by PostgreSQL (issue 31).
    check_text(job_name, field="name", max_length=200)
    check_text(key, field="key", max_length=MAX_KEY_LENGTH)
    if isinstance(tenant, str):
        check_text(tenant, field="tenant", max_length=200)
    holders: list[tuple[uuid.UUID, str | None]] = []
    for alias in reading_aliases():  # Q1: the job's queue may live on any alias
        live = (
            Job.objects.using(alias)
            .filter(name=job_name, idempotency_key=key)
            .exclude(state__in=FINISHED_STATES)
        )
        if tenant is not ANY_TENANT:
            live = live.filter(tenant_id=tenant)
        holders += live.order_by("id").values_list("id", "tenant_id")[:2]
    if len(holders) > 1:
        raise InvalidArgument(
            "tenant",
            None,
            f"live jobs of several tenants hold key {key!r} "
            f"({', '.join(repr(t) for _, t in holders)}, ...): name the tenant",
            job=job_name,
        )
    if not holders:
        return None
    pk = holders[0][0]
    # The job may have finished between the read and the cancel: then nothing holds
    # the key any more, which is what the caller wanted.
    who = operator_of(actor)
    text = check_text(
        reason[:MAX_REASON_LENGTH], field="reason", max_length=MAX_REASON_LENGTH
    )
    return pk if _cancel(pk, text, who) is not None else None


def remove(job_id: object, *, actor: Any = None) -> None:
    """Delete one job that is not running (cancel a running one first), from the hot
    table or from the archive (Q2). ``actor`` is recorded, and the record outlives
    the job (see the module)."""
    pk = parse_job_id(job_id)
    who = operator_of(actor)
    alias = alias_of(pk)  # Q1: where the job is
    with transaction.atomic(using=alias):
        job = _name_of(pk, alias)
        if _db(alias).run(QUERIES["job_remove"], id=pk):
            _record(job, pk, "remove", who, "", alias)
            return
        if job is None:  # Q2: a finished job that moved to the archive
            moved = JobArchive.objects.using(alias)
            named = moved.filter(pk=pk).only("name").first()
            if named is not None and _db(alias).run(QUERIES["archive_remove"], id=pk):
                _record(named, pk, "remove", who, "", alias)
                return
    raise JobNotRemovable(pk, load(pk).state)


def promote(job_id: object, *, actor: Any = None) -> None:
    """Make a job that waits on its run time due now. ``actor`` is recorded."""
    pk = parse_job_id(job_id)
    who = operator_of(actor)
    alias = alias_of(pk)  # Q1: where the job is
    with transaction.atomic(using=alias):
        if _db(alias).run(QUERIES["job_promote"], id=pk, now=None):
            _record(_name_of(pk, alias), pk, "promote", who, "", alias)
            return
    raise JobNotPromotable(pk, load(pk).state)


def pause_queue(queue: str, *, by: str = "") -> bool:
    """Pause a queue: no worker claims from it from its next claim on; enqueues land.
    Answers whether it was running (False: it was paused already). The pause is kept
    on the alias that holds the queue (Q1), where its claims read it."""
    by = check_text(str(by)[:255], field="by", max_length=255)
    queue = validate_queue(queue)
    return bool(
        _db(queue_alias(queue)).run(QUERIES["queue_pause"], queue=queue, paused_by=by)
    )


def resume_queue(queue: str) -> bool:
    """Resume a paused queue; answers whether it was paused."""
    queue = validate_queue(queue)
    return bool(_db(queue_alias(queue)).run(QUERIES["queue_resume"], queue=queue))


def drain_worker(worker_id: str, *, by: str = "") -> bool:
    """Ask one live worker to drain: at its next heartbeat it stops claiming, finishes
    what it runs and exits. Answers whether the worker was live."""
    worker_id = check_text(str(worker_id), field="worker_id", max_length=200)
    by = check_text(str(by)[:255], field="by", max_length=255)
    # Q1: a worker registers on every alias its queues live on, and each of its
    # heartbeats reads the row of its own alias.
    asked = [
        _db(alias).run(QUERIES["worker_drain_request"], id=worker_id, requested_by=by)
        for alias in reading_aliases()
    ]
    return any(asked)


def paused_queues() -> list[str]:
    """The paused queues, by name, of every alias (Q1)."""
    return sorted(
        {
            queue
            for alias in reading_aliases()
            for queue in QueuePause.objects.using(alias).values_list("queue", flat=True)
        }
    )


BULK_LIMIT = 1000
_BULK = {
    "retry": ("requeue", ("done", "failed", "dead", "cancelled")),
    "cancel": ("cancel", ("ready", "delayed", "running", "suspended")),
    "remove": (
        "remove",
        ("ready", "delayed", "suspended", "done", "failed", "dead", "cancelled"),
    ),
    "promote": ("promote", ("delayed", "suspended")),
}


def bulk(
    verb: str,
    *,
    state: str,
    queue: str | None = None,
    name: str | None = None,
    tenant_id: str | None = None,
    fingerprint: str | None = None,
    reason: str = "",
    actor: Any = None,
) -> dict[str, int]:
    """Apply ``verb`` (retry, cancel, remove, promote) to at most 1,000 matching jobs;
    ``fingerprint`` (P10) keeps those whose last failed attempt has it (a dead-letter
    group: Retry-group is ``bulk("retry", state="dead", fingerprint=F)``, Cancel-group
    cancels the live jobs still retrying that failure).

    Answers ``{"affected": n, "remaining": m}``: ``remaining`` is what another call could
    still move (a row whose key a live job holds is not counted), so calling until it is
    zero ends. Each row moves through the same fenced statement as the single verb.
    """
    if verb not in _BULK:
        raise InvalidArgument("verb", verb, f"one of {', '.join(_BULK)}")
    kind, states = _BULK[verb]
    if state not in states:
        raise InvalidArgument(
            "state", state, f"{verb} takes one of {', '.join(states)}"
        )
    if queue is not None:
        validate_queue(queue, field="queue")
    for field, value in (("name", name), ("tenant_id", tenant_id)):
        if value is not None:  # B4: checked before any statement (issue 31)
            check_text(value, field=field, max_length=200)
    if fingerprint is not None:
        fingerprint = check_fingerprint(fingerprint)
    filters = {
        "state": state,
        "queue": queue,
        "name": name,
        "tenant_id": tenant_id,
        "fingerprint": fingerprint,
    }
    aliases = (queue_alias(queue),) if queue is not None else reading_aliases()
    ids: list[uuid.UUID] = []
    remaining = 0
    for alias in aliases:  # Q1: the matching jobs of every alias, 1,000 in all
        taken, left = _candidates(alias, BULK_LIMIT - len(ids), kind, filters)
        ids += taken
        remaining += left
    who = operator_of(actor)
    single: dict[str, Callable[..., object]] = {
        "retry": retry,
        "remove": remove,
        "promote": promote,
    }
    affected = 0
    for pk in ids:
        try:
            if verb == "cancel":
                cancel(pk, reason, actor=who)
            else:
                single[verb](pk, actor=who)
        except (
            JobNotRequeueable,
            JobNotCancellable,
            JobNotRemovable,
            JobNotPromotable,
            JobDuplicate,
        ):
            continue  # it moved on (or a key was taken) between the read and the write
        affected += 1
    return {"affected": affected, "remaining": remaining}


def _candidates(
    alias: str, budget: int, kind: str, filters: dict[str, str | None]
) -> tuple[list[uuid.UUID], int]:
    """At most ``budget`` ids a bulk verb may move on ``alias``, and how many more a
    later call could (all of them when the budget is spent)."""
    rows = _db(alias).run(
        QUERIES["job_bulk_candidates"],
        **filters,
        requeue=kind == "requeue",
        limit=max(budget, 1),
    )
    if not rows:
        return [], 0
    if budget <= 0:  # nothing taken here: this alias's first row and the rest remain
        return [], int(rows[0]["remaining"]) + 1
    return [row["id"] for row in rows], int(rows[0]["remaining"])
