"""The write path of an enqueue: check every input, then one statement for the batch.

Everything that can be refused is refused before the statement runs, so a refused
enqueue writes no row (B1). ``job_enqueue`` inserts the batch with array parameters
(H3) and answers, per input, the id of the row it wrote or of the live job that holds
its idempotency key (J2). Inside a transaction the checked rows are staged in the
outbox instead, on the caller's connection (outbox.py, O1).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ultimate_jobs import outbox, payload
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import current_correlation_id
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.declarations import (
    MAX_CONCURRENCY_KEY_LENGTH,
    MAX_KEY_LENGTH,
    Concurrency,
    JobDefinition,
    _NoTenant,
    registry,
)
from ultimate_jobs.exceptions import (
    InvalidArgument,
    JobDeclarationInvalid,
    JobDuplicate,
    JobsError,
    JobTenantRequired,
)
from ultimate_jobs.handle import Enqueued
from ultimate_jobs.ids import uuid7s
from ultimate_jobs.leases import keyed_lease_key
from ultimate_jobs.signals import job_enqueued
from ultimate_jobs.sql import QUERIES

if TYPE_CHECKING:
    from ultimate_jobs.handle import JobHandle

logger = logging.getLogger(__name__)
_RACE_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Row:
    """One checked input, ready to be written: the job row of every write path.

    The fields are the columns of the ``job_input`` fragment (sql/jobs.sql), in its
    order; job_enqueue, outbox_stage and scheduler_fire take them as arrays named after
    the fields (``array_params``).
    """

    id: uuid.UUID
    run_id: uuid.UUID
    name: str
    queue: str
    priority: int
    input: str  # JSON text
    tenant_id: str | None
    idempotency_key: str
    max_attempts: int
    run_at: Any
    delay: float
    correlation_id: str
    enqueued_by: str
    concurrency_key: str | None = None  # the lease key of a keyed limit (L2)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        """The row of a stored record (a claimed outbox row): same ids, and its
        ``run_at`` already resolved, so no delay."""
        return cls(
            **{name: record[name] for name in FIELDS if name != "delay"}, delay=0.0
        )


FIELDS = tuple(field.name for field in dataclasses.fields(Row))


def _call(
    definition: JobDefinition, field: str, function: Any, kwargs: dict[str, Any]
) -> Any:
    try:
        return function(kwargs)
    except JobsError:
        raise
    except Exception as exc:
        raise JobDeclarationInvalid(
            field, kwargs, f"raised {exc!r}", job=definition.name
        ) from exc


def idempotency_key_of(definition: JobDefinition, kwargs: dict[str, Any]) -> str:
    key = _call(definition, "idempotency_key", definition.idempotency_key, kwargs)
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise JobDeclarationInvalid(
            "idempotency_key",
            key,
            f"must answer a non-empty string of at most {MAX_KEY_LENGTH} characters",
            job=definition.name,
        )
    return key


def tenant_of(
    definition: JobDefinition, kwargs: dict[str, Any], actor: Any = None
) -> str | None:
    if isinstance(definition.tenant, _NoTenant):
        return None
    tenant = _call(definition, "tenant", definition.tenant, kwargs)
    if tenant is None and actor is not None:
        tenant = getattr(actor, "tenant_id", None)
    if isinstance(tenant, int) and not isinstance(tenant, bool):
        tenant = str(tenant)
    if isinstance(tenant, uuid.UUID):
        tenant = str(tenant)
    if not isinstance(tenant, str) or not tenant or len(tenant) > 200:
        raise JobTenantRequired(
            "tenant",
            tenant,
            "must answer a tenant id (a non-empty string); declare tenant=NO_TENANT for none",
            job=definition.name,
        )
    return tenant


def concurrency_key_of(definition: JobDefinition, kwargs: dict[str, Any]) -> str | None:
    if not isinstance(definition.concurrency, Concurrency):
        return None
    key = _call(definition, "concurrency.key", definition.concurrency.key, kwargs)
    if not isinstance(key, str) or not key or len(key) > MAX_CONCURRENCY_KEY_LENGTH:
        raise JobDeclarationInvalid(
            "concurrency.key",
            key,
            f"must answer a non-empty string of at most {MAX_CONCURRENCY_KEY_LENGTH} characters",
            job=definition.name,
        )
    return key


def actor_id(actor: Any) -> str:
    if actor is None:
        return ""
    if isinstance(actor, str):
        return actor
    pk = getattr(actor, "pk", None) or getattr(actor, "id", None)
    return str(pk if pk is not None else actor)[:255]


def build_rows(handle: JobHandle, inputs: list[Any]) -> list[Row]:
    """Check every input and answer the rows to write; raises before anything is written."""
    definition, options = handle.definition, handle.options
    ids = uuid7s(2 * len(inputs))
    correlation_id = current_correlation_id()[:255]
    enqueued_by = actor_id(options.actor)
    queue = options.queue or definition.queue
    priority = definition.priority if options.priority is None else options.priority
    rows = []
    for index, kwargs in enumerate(inputs):
        if not isinstance(kwargs, dict):
            raise InvalidArgument(
                f"inputs[{index}]",
                kwargs,
                "each input is a dict of keyword arguments",
                job=definition.name,
            )
        encoded = payload.encode(definition.name, definition.signature, kwargs)
        key = concurrency_key_of(definition, kwargs)
        rows.append(
            Row(
                id=ids[2 * index],
                run_id=options.run_id or ids[2 * index + 1],
                name=definition.name,
                queue=queue,
                priority=priority,
                input=encoded,
                tenant_id=tenant_of(definition, kwargs, options.actor),
                idempotency_key=idempotency_key_of(definition, kwargs),
                max_attempts=definition.retry.attempts,
                run_at=options.run_at,
                delay=options.delay,
                correlation_id=correlation_id,
                enqueued_by=enqueued_by,
                concurrency_key=None
                if key is None
                else keyed_lease_key(definition.name, key),
            )
        )
    return rows


def array_params(rows: list[Row]) -> dict[str, Any]:
    """The rows as one array per field (H3: a fixed parameter count for any batch)."""
    return {name: [getattr(row, name) for row in rows] for name in FIELDS}


def holder_params(rows: list[Row]) -> dict[str, Any]:
    """The parameters of job_holders: who holds each row's place."""
    return {
        "id": [row.id for row in rows],
        "name": [row.name for row in rows],
        "tenant_id": [row.tenant_id for row in rows],
        "idempotency_key": [row.idempotency_key for row in rows],
    }


def publish(db: Database, rows: list[Row], *, now: Any = None) -> list[Enqueued]:
    """Write rows with job_enqueue; answers one Enqueued per row, in order.

    Rows that inserted nothing were deduped: job_holders names the job holding each
    one's place. A row whose holder finished between the two statements is written
    again (its key is free now).
    """
    answers: list[Enqueued | None] = [None] * len(rows)
    pending = list(range(len(rows)))
    for _ in range(_RACE_RETRIES):
        batch = [rows[i] for i in pending]
        inserted = {
            r["id"]
            for r in db.run(QUERIES["job_enqueue"], now=now, **array_params(batch))
        }
        deduped = []
        for index in pending:
            row = rows[index]
            if row.id in inserted:
                answers[index] = Enqueued(row.id, row.run_id, deduped=False)
            else:
                deduped.append(index)
        if not deduped:
            return [a for a in answers if a is not None]
        held = db.run(
            QUERIES["job_holders"], **holder_params([rows[i] for i in deduped])
        )
        found = {deduped[h["ord"] - 1]: h for h in held}
        pending = []
        for index in deduped:
            holder = found.get(index)
            if holder is None:
                pending.append(index)
            else:
                answers[index] = Enqueued(holder["id"], holder["run_id"], deduped=True)
        if not pending:
            break
    for index in pending:  # still racing after a few rounds: answer the row's own ids
        answers[index] = Enqueued(rows[index].id, rows[index].run_id, deduped=True)
    return [a for a in answers if a is not None]


def enqueue_inputs(
    handle: JobHandle, inputs: list[Any], *, single: bool
) -> list[Enqueued]:
    """Check, write and announce; the body of JobHandle.enqueue and .enqueue_many."""
    if not inputs:
        return []
    rows = build_rows(handle, inputs)
    settings = get_settings()
    db = DjangoDatabase(settings.DATABASE)
    staged = outbox.should_stage(settings, job=handle.name)
    if staged:  # O1: in the caller's transaction, on its connection
        answers = outbox.stage(
            db,
            rows,
            job=handle.name,
            refuse_held=handle.options.on_conflict == "error",
        )
    elif handle.options.on_conflict == "error" and not single:
        with transaction.atomic(using=db.alias):
            answers = publish(db, rows)
            _raise_on_duplicate(handle, rows, answers)
    else:
        answers = publish(db, rows)
        if handle.options.on_conflict == "error":
            _raise_on_duplicate(handle, rows, answers)
    # Signals are sent by the registered handle (not a .using() copy), so receivers
    # can connect with sender=my_job.
    registered = registry.get(handle.name) if handle.name in registry else handle
    for row, answer in zip(rows, answers, strict=True):
        logger.info(
            "jobs.enqueued",
            extra={
                "job_id": str(answer.id),
                "job_name": row.name,
                "queue": row.queue,
                "tenant_id": row.tenant_id,
                "deduped": answer.deduped,
                "staged": staged,
                "correlation_id": row.correlation_id,
            },
        )
        if not answer.deduped:
            job_enqueued.send(sender=registered, enqueued=answer, handle=handle)
    return answers


def _raise_on_duplicate(
    handle: JobHandle, rows: list[Row], answers: list[Enqueued]
) -> None:
    for row, answer in zip(rows, answers, strict=True):
        if answer.deduped:
            raise JobDuplicate(handle.name, row.idempotency_key, answer.id)
