"""The write path of an enqueue: check every input, then one statement for the batch.

Everything that can be refused is refused before the statement runs, so a refused
enqueue writes no row (B1). ``job_enqueue`` inserts the batch with array parameters
(H3; one row: ``job_enqueue_one``, scalar parameters) and names the rows it did not
write; ``job_holders`` then answers the live job that holds each one's idempotency key
(J2). Inside a transaction the checked rows are staged in the
outbox instead, on the caller's connection (outbox.py, O1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DjangoDatabase, ensure_jobs_database
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.enqueue import outbox
from ultimate_jobs.enqueue.options import Enqueueable, Enqueued, written
from ultimate_jobs.enqueue.rows import (
    Row,
    array_params,
    build_rows,
    holder_params,
    scalar_params,
)
from ultimate_jobs.ground.exceptions import (
    JobDuplicate,
)
from ultimate_jobs.ground.signals import job_enqueued
from ultimate_jobs.observability.redaction import shown_correlation
from ultimate_jobs.sql.rows import (
    JOB_ENQUEUE,
    JOB_ENQUEUE_MANY,
    JOB_ENQUEUE_ONE,
    JOB_HOLDERS,
)

logger = logging.getLogger(__name__)
_RACE_RETRIES = 3


def publish(
    db: Database, rows: list[Row], *, now: Any = None, many: bool = False
) -> list[Enqueued]:
    """Write rows with job_enqueue (one row: job_enqueue_one; ``many``, the rows of one
    enqueue_many call: job_enqueue_many); answers one Enqueued per row, in order.

    Rows that inserted nothing were deduped: job_holders names the job holding each
    one's place. A row whose holder finished between the two statements is written
    again (its key is free now).
    """
    # One prepared round trip on Django's connection outside a transaction (issue 26).
    run = db.hot if isinstance(db, DjangoDatabase) else db.run
    # Every row written unless the statement says otherwise (``written``: the answer
    # without the frozen dataclass's __init__).
    answers = [written(row.id, row.run_id) for row in rows]
    pending = list(range(len(rows)))
    batch = rows
    for _ in range(_RACE_RETRIES):
        not_written = _insert(run, batch, now, many=many)
        if not not_written:
            return answers
        deduped = [pending[position] for position in not_written]
        held = run(JOB_HOLDERS, **holder_params([rows[i] for i in deduped]))
        found = {deduped[h["ord"] - 1]: h for h in held}
        pending = []
        for index in deduped:
            holder = found.get(index)
            if holder is None:  # its holder finished meanwhile: write it again
                pending.append(index)
            else:
                answers[index] = Enqueued(holder["id"], holder["run_id"], deduped=True)
        if not pending:
            return answers
        batch = [rows[i] for i in pending]
    for index in pending:  # still racing after a few rounds: the row's own ids
        answers[index] = Enqueued(rows[index].id, rows[index].run_id, deduped=True)
    return answers


def _insert(
    run: Callable[..., list[Any]], batch: list[Row], now: Any, *, many: bool = False
) -> list[int]:
    """Insert ``batch``; answer the positions (0-based) of the rows it did not write.

    The ids are the client's, so a written row needs no answer (issue 26). One row
    takes job_enqueue_one, its columns as scalar parameters: packing seventeen
    one-element arrays cost more than the row's own checks.
    """
    if len(batch) == 1:
        [one] = run(JOB_ENQUEUE_ONE, now=now, **scalar_params(batch[0]))
        return [] if one["inserted"] else [0]
    if many:  # a column every row shares travels once (job_input_shared)
        [answer] = run(JOB_ENQUEUE_MANY, now=now, **array_params(batch, shared=True))
    else:
        [answer] = run(JOB_ENQUEUE, now=now, **array_params(batch))
    return [ordinal - 1 for ordinal in answer["deduped"]]


def enqueue_inputs(
    handle: Enqueueable, inputs: list[Any], *, single: bool
) -> list[Enqueued]:
    """Check, write and announce; the body of JobHandle.enqueue and .enqueue_many."""
    if not inputs:
        return []
    rows = build_rows(handle, inputs)
    settings = get_settings()
    by_alias: dict[str, list[int]] = {}
    for index, row in enumerate(rows):  # Q1: each row goes to its queue's alias
        by_alias.setdefault(settings.database_for(row.queue), []).append(index)
    for alias in by_alias:  # the app installed, PostgreSQL: said before any SQL
        ensure_jobs_database(alias)
    answers: list[Enqueued | None] = [None] * len(rows)
    staged = False
    for alias, indexes in by_alias.items():  # one statement per alias
        part = [rows[i] for i in indexes]
        written, staged_part = _write(handle, settings, alias, part, single=single)
        staged = staged or staged_part
        for index, answer in zip(indexes, written, strict=True):
            answers[index] = answer
    done = [a for a in answers if a is not None]
    return announce(handle, rows, done, staged=staged)


def _write(
    handle: Enqueueable,
    settings: JobsSettings,
    alias: str,
    rows: list[Row],
    *,
    single: bool,
) -> tuple[list[Enqueued], bool]:
    """Write rows whose queues live on ``alias``: staged in the caller's transaction
    (on the alias it is open on) or published there; answers and whether staged."""
    db = DjangoDatabase(alias)
    stage_on = outbox.staging_alias(settings, job=handle.name, target=alias)
    if stage_on is not None:  # O1: in the caller's transaction, on its connection
        answers = outbox.stage(
            DjangoDatabase(stage_on),
            rows,
            job=handle.name,
            refuse_held=handle.options.on_conflict == "error",
            holders=db,
        )
        return answers, True
    if handle.options.on_conflict == "error" and not single:
        with transaction.atomic(using=db.alias):
            answers = publish(db, rows, many=True)
            _raise_on_duplicate(handle, rows, answers)
    else:
        answers = publish(db, rows, many=not single)
        if handle.options.on_conflict == "error":
            _raise_on_duplicate(handle, rows, answers)
    return answers, False


def announce(
    handle: Enqueueable, rows: list[Row], answers: list[Enqueued], *, staged: bool
) -> list[Enqueued]:
    # Signals are sent by the registered handle (not a .using() copy), so receivers
    # can connect with sender=my_job.
    registered = registry.get(handle.name) if handle.name in registry else handle
    # Asked once a batch: the per-row record (its extra dict, the id as text) is built
    # only when a handler at INFO would see it.
    logged = logger.isEnabledFor(logging.INFO)
    if not logged and not job_enqueued.receivers:
        return answers  # nothing to log or send: no walk over the batch (issue 26)
    for row, answer in zip(rows, answers, strict=True):
        if logged:
            logger.info(
                "jobs.enqueued",
                extra={
                    "job_id": str(answer.id),
                    "job_name": row.name,
                    "queue": row.queue,
                    "tenant_id": row.tenant_id,
                    "deduped": answer.deduped,
                    "staged": staged,
                    "correlation_id": shown_correlation(
                        row.name, row.correlation_id, row.input, row.redact
                    ),
                },
            )
        if not answer.deduped:
            job_enqueued.send(sender=registered, enqueued=answer, handle=handle)
    return answers


def _raise_on_duplicate(
    handle: Enqueueable, rows: list[Row], answers: list[Enqueued]
) -> None:
    for row, answer in zip(rows, answers, strict=True):
        if answer.deduped:
            raise JobDuplicate(handle.name, row.idempotency_key, answer.id)
