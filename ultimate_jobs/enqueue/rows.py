"""Checking inputs into job rows: the one row type every write path writes (J1-J3, L2).

Everything that can be refused is refused here, before any statement runs, so a
refused enqueue writes no row (B1). ``Row`` is the job row of every path (a direct
enqueue, the outbox, a cron fire); its fields are the columns of the ``job_input``
fragment of sql/jobs.sql, in order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.definition import (
    MAX_CONCURRENCY_KEY_LENGTH,
    MAX_KEY_LENGTH,
    Concurrency,
    JobDefinition,
    NoTenant,
)
from ultimate_jobs.declaration.redaction import (
    Redaction,
    cached_redaction,
    scrub_text,
)
from ultimate_jobs.enqueue.options import Enqueueable
from ultimate_jobs.ground.bounds import check_text, text_problem
from ultimate_jobs.ground.context import current_correlation_id
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobDeclarationInvalid,
    JobsError,
    JobTenantRequired,
)
from ultimate_jobs.ground.ids import uuid7s
from ultimate_jobs.limits.slots import keyed_lease_key
from ultimate_jobs.sql import arrays


class Row(NamedTuple):
    """One checked input, ready to be written: the job row of every write path.

    The fields are the columns of the ``job_input`` fragment (sql/jobs.sql), in its
    order; job_enqueue, outbox_stage and scheduler_fire take them as arrays named after
    the fields (``array_params``). An immutable tuple: a third of the cost of a frozen
    dataclass to build, and a batch turns into its columns with one ``zip``.
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
    # B5: the declared paths (JSON text, None: none) and the key with its hidden
    # values replaced (None: it holds none), kept with the row.
    redact: str | None = None
    shown_key: str | None = None
    # S10, Q1: the spawning job of a child staged for another alias (None: none); the
    # relay publishes the child with it. A child on the parent's own alias is adopted
    # by spawn_record instead (sql/workflows.sql).
    parent_id: uuid.UUID | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        """The row of a stored record (a claimed outbox row): same ids, and its
        ``run_at`` already resolved, so no delay."""
        defaults = cls._field_defaults  # the optional columns may be absent
        return cls(
            **{
                name: record[name] if name in record else defaults[name]
                for name in FIELDS
                if name != "delay"
            },
            delay=0.0,
        )


FIELDS: tuple[str, ...] = Row._fields


MAX_ACTOR_LENGTH = 255  # the enqueued_by column
MAX_CORRELATION_LENGTH = 255  # the correlation_id column
MAX_TENANT_LENGTH = 200  # the tenant_id column


def redaction_of(definition: JobDefinition) -> Redaction:
    """The job's redaction: its declared paths and the REDACT setting's patterns (B5)."""
    return cached_redaction(definition.redact, get_settings().REDACT)


def _call(
    definition: JobDefinition, field: str, function: Any, kwargs: dict[str, Any]
) -> Any:
    try:
        return function(kwargs)
    except JobsError:
        raise
    except Exception as exc:
        redaction = redaction_of(definition)
        raise JobDeclarationInvalid(
            field,
            redaction.apply(kwargs),
            redaction.scrub(f"raised {exc!r}", kwargs),
            job=definition.name,
        ) from exc


def idempotency_key_of(definition: JobDefinition, kwargs: dict[str, Any]) -> str:
    key = _call(definition, "idempotency_key", definition.idempotency_key, kwargs)
    if (
        not isinstance(key, str)
        or not key
        or len(key) > MAX_KEY_LENGTH
        or text_problem(key) is not None
    ):
        raise JobDeclarationInvalid(
            "idempotency_key",
            key,
            f"must answer a non-empty string of at most {MAX_KEY_LENGTH} characters, "
            "without NUL or lone surrogates",
            job=definition.name,
        )
    return key


def shown_key_of(redaction: Redaction, key: str, kwargs: dict[str, Any]) -> str | None:
    """The idempotency key as operators see it (B5): its hidden values replaced, or
    None when it holds none (the key itself is shown). Dedupe uses the real key."""
    secrets = redaction.secrets(kwargs)
    if not secrets:
        return None
    shown = scrub_text(key, secrets)
    return None if shown == key else shown[:MAX_KEY_LENGTH]


_NESTED = (dict, list, tuple)  # the values Redaction.secrets walks into


def secret_free(
    redaction: Redaction, kwargs: dict[str, Any], plain: dict[Any, bool]
) -> bool:
    """True when ``kwargs`` can hold no hidden value (B5), so ``shown_key_of`` would
    answer None without walking it: no nested value, and no key hidden by a pattern or
    by a declared path starting there. ``plain`` keeps each key's answer for a batch
    (issue 26: the walk was half the cost of a flat input's row)."""
    for name, value in kwargs.items():
        if isinstance(value, _NESTED):
            return False
        free = plain.get(name)
        if free is None:
            text = name if type(name) is str else str(name)
            free = plain[name] = not (
                redaction.hides_key(text)
                or any(path[0] == text for path in redaction.split)
            )
        if not free:
            return False
    return True


def tenant_of(
    definition: JobDefinition, kwargs: dict[str, Any], actor: Any = None
) -> str | None:
    if isinstance(definition.tenant, NoTenant):
        return None
    tenant = _call(definition, "tenant", definition.tenant, kwargs)
    if tenant is None and actor is not None:
        tenant = getattr(actor, "tenant_id", None)
    if isinstance(tenant, int) and not isinstance(tenant, bool):
        tenant = str(tenant)
    if isinstance(tenant, uuid.UUID):
        tenant = str(tenant)
    if (
        not isinstance(tenant, str)
        or not tenant
        or len(tenant) > MAX_TENANT_LENGTH
        or text_problem(tenant) is not None
    ):
        raise JobTenantRequired(
            "tenant",
            tenant,
            f"must answer a tenant id (a non-empty string of at most {MAX_TENANT_LENGTH} "
            "characters, without NUL); declare tenant=NO_TENANT for none",
            job=definition.name,
        )
    return tenant


def concurrency_key_of(definition: JobDefinition, kwargs: dict[str, Any]) -> str | None:
    if not isinstance(definition.concurrency, Concurrency):
        return None
    key = _call(definition, "concurrency.key", definition.concurrency.key, kwargs)
    if (
        not isinstance(key, str)
        or not key
        or len(key) > MAX_CONCURRENCY_KEY_LENGTH
        or text_problem(key) is not None
    ):
        raise JobDeclarationInvalid(
            "concurrency.key",
            key,
            f"must answer a non-empty string of at most {MAX_CONCURRENCY_KEY_LENGTH} characters",
            job=definition.name,
        )
    return key


def actor_id(actor: Any, *, job: str = "") -> str:
    """What ``enqueued_by`` records of an actor: a string as it is, else its pk (H2).
    Longer than the column, or holding a NUL, it is refused (B4)."""
    if actor is None:
        return ""
    if isinstance(actor, str):
        text = actor
    else:
        pk = getattr(actor, "pk", None) or getattr(actor, "id", None)
        text = str(pk if pk is not None else actor)
    return check_text(text, field="actor", max_length=MAX_ACTOR_LENGTH, job=job)


def build_rows(handle: Enqueueable, inputs: list[Any]) -> list[Row]:
    """Check every input and answer the rows to write; raises before anything is written."""
    definition, options = handle.definition, handle.options
    settings = get_settings()
    redaction = cached_redaction(definition.redact, settings.REDACT)
    correlation_id = check_text(
        current_correlation_id()[:MAX_CORRELATION_LENGTH],
        field="correlation_id",
        max_length=MAX_CORRELATION_LENGTH,
        job=definition.name,
    )
    enqueued_by = actor_id(options.actor, job=definition.name)
    ids = uuid7s(2 * len(inputs))
    queue = options.queue or definition.queue
    priority = definition.priority if options.priority is None else options.priority
    redact = json.dumps(list(definition.redact)) if definition.redact else None
    # What is the same for every row of the batch, read once (issue 26): a job of no
    # tenant or no keyed limit calls nothing per row for them.
    name, signature, version = definition.name, definition.signature, definition.version
    max_bytes, max_depth = settings.MAX_INPUT_BYTES, settings.MAX_INPUT_DEPTH
    max_attempts, run_at, delay = (
        definition.retry.attempts,
        options.run_at,
        options.delay,
    )
    run_id, actor = options.run_id, options.actor
    tenanted = not isinstance(definition.tenant, NoTenant)
    keyed = isinstance(definition.concurrency, Concurrency)
    encode, make = payload.encode, Row._make
    plain: dict[Any, bool] = {}  # each input key: hidden or not (secret_free)
    rows = []
    for index, kwargs in enumerate(inputs):
        if not isinstance(kwargs, dict):
            raise InvalidArgument(
                f"inputs[{index}]",
                redaction.apply(kwargs),
                "each input is a dict of keyword arguments",
                job=name,
            )
        encoded = encode(
            name,
            signature,
            kwargs,
            max_bytes=max_bytes,
            max_depth=max_depth,
            redaction=redaction,
            version=version,
        )
        key = concurrency_key_of(definition, kwargs) if keyed else None
        idempotency_key = idempotency_key_of(definition, kwargs)
        # In the order of Row's fields (FIELDS): positional, a third of keywords' cost.
        rows.append(
            make(
                (
                    ids[2 * index],
                    run_id or ids[2 * index + 1],
                    name,
                    queue,
                    priority,
                    encoded,
                    tenant_of(definition, kwargs, actor) if tenanted else None,
                    idempotency_key,
                    max_attempts,
                    run_at,
                    delay,
                    correlation_id,
                    enqueued_by,
                    None if key is None else keyed_lease_key(name, key),
                    redact,
                    None
                    if secret_free(redaction, kwargs, plain)
                    else shown_key_of(redaction, idempotency_key, kwargs),
                    None,  # parent_id: set by run.spawn for another alias (S10)
                )
            )
        )
    return rows


def array_params(rows: list[Row], *, shared: bool = False) -> dict[str, Any]:
    """The rows as one array per field (H3: a fixed parameter count for any batch),
    each packed in PostgreSQL's binary array format (sql/arrays.py). ``shared`` (for
    job_enqueue_many, whose ``job_input_shared`` fragment hands it to every row): a
    shareable column of one value down the batch travels as a one-element array
    (issue 26)."""
    if not rows:
        return {name: pack([]) for name, pack in zip(FIELDS, _PACKERS, strict=True)}
    columns = zip(*rows, strict=True)
    if not shared or len(rows) == 1:
        return {
            name: pack(column)
            for name, pack, column in zip(FIELDS, _PACKERS, columns, strict=True)
        }
    params = {}
    for name, pack, column in zip(FIELDS, _PACKERS, columns, strict=True):
        if name in SHARED:
            first = column[0]
            if column.count(first) == len(column):
                column = column[:1]
        params[name] = pack(column)
    return params


def scalar_params(row: Row) -> dict[str, Any]:
    """One row's columns as scalar parameters (job_enqueue_one): no arrays to pack.
    An instant travels as ISO 8601 text in UTC, as ``arrays.timestamps`` writes it."""
    params = row._asdict()
    run_at = row.run_at
    if run_at is not None:
        params["run_at"] = arrays.iso(run_at)
    return params


# The fields job_input_shared takes as one element for the whole batch when every row
# has the same value (not the ids, the input or the key: always per row).
SHARED = frozenset(FIELDS) - {"id", "run_id", "input", "idempotency_key"}

# How each field of Row is packed (sql/arrays.py), in the order of FIELDS.
_PACKERS: tuple[Callable[[Sequence[Any]], arrays.BinaryArray], ...] = (
    arrays.uuids,  # id
    arrays.uuids,  # run_id
    arrays.texts,  # name
    arrays.texts,  # queue
    arrays.smallints,  # priority
    arrays.jsonbs,  # input
    arrays.texts,  # tenant_id
    arrays.unique_texts,  # idempotency_key
    arrays.integers,  # max_attempts
    arrays.timestamps,  # run_at
    arrays.doubles,  # delay
    arrays.texts,  # correlation_id
    arrays.texts,  # enqueued_by
    arrays.texts,  # concurrency_key
    arrays.jsonbs,  # redact
    arrays.texts,  # shown_key
    arrays.uuids,  # parent_id
)


def holder_params(rows: list[Row]) -> dict[str, Any]:
    """The parameters of job_holders: who holds each row's place."""
    return {
        "id": arrays.uuids([row.id for row in rows]),
        "name": arrays.texts([row.name for row in rows]),
        "tenant_id": arrays.texts([row.tenant_id for row in rows]),
        "idempotency_key": arrays.texts([row.idempotency_key for row in rows]),
    }
