"""Fan-out and fan-in (S10, S11): what ``run.spawn`` and ``run.wait_for_jobs`` do.

``spawn`` enqueues a child as a step: the child row and the step's checkpoint commit in
ONE transaction on the parent's jobs alias (the machinery of ``atomic_step``, fenced on
the parent's claim), so a replay answers the same child and a crash between the two
never loses or doubles it. A child whose queue lives on another alias (Q1) is staged in
that transaction's outbox instead, with the parent's id, and the relay publishes it
exactly once under the id the step recorded, with ``parent_id`` set there. The child's own idempotency key, tenant rule and limits apply; a
tenant rule that answers None falls back to the parent's tenant.

``wait_for_jobs`` records its children and deadline once, then, under the fan-in lock
(sql/workflows.sql), reads where every child is: all settled answers one ``Outcome``
per child (stored with the step, so a replay answers the same list even after the
children are purged); otherwise the run suspends (no slot held, no attempt spent) until
the settle of its last child wakes it (the trigger of migration 0010 on one database;
for children on another alias, the settling worker's best-effort wake, runtime/parents.py),
its deadline, or its ``event_poll`` re-check (the guarantee behind every wake).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from django.db import transaction

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DjangoDatabase, Row
from ultimate_jobs.enqueue import outbox
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.enqueue.options import Enqueued
from ultimate_jobs.enqueue.rows import Row as EnqueueRow
from ultimate_jobs.enqueue.rows import build_rows
from ultimate_jobs.enqueue.write import announce, publish
from ultimate_jobs.ground.durations import Duration, optional_duration
from ultimate_jobs.ground.exceptions import FanInTimeout, InvalidArgument, RunSuspended
from ultimate_jobs.sql import QUERIES


class Journal(Protocol):
    """What fan-out and fan-in use of the run's journal (steps.Journal, which calls
    this module: a protocol, so the two modules do not import each other)."""

    alias: str
    atomic_db: Database
    job: Any
    definition: Any

    def enter(self, name: str, kind: str) -> Any: ...
    def refuse_to_start(self, name: str) -> None: ...
    def refuse_to_record(self, name: str) -> None: ...
    def refuse_to_park(self, name: str) -> None: ...
    def suspend(self, suspension: RunSuspended) -> NoReturn: ...
    def write(
        self, query: str, *, db: Database | None = None, **params: Any
    ) -> list[Row]: ...
    def remember(
        self, name: str, kind: str, status: str, output: Any, wake_at: Any
    ) -> None: ...


SETTLED = frozenset({"done", "failed", "dead", "cancelled"})
MISSING = "missing"  # in no table of any alias and not staged: removed or purged


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one child ended (S11): its state, its stored result (``store_result=True``
    children) and its last error (None for a child that completed)."""

    id: uuid.UUID
    state: str
    result: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class _Parent:
    """The actor a child is enqueued by: ``enqueued_by`` is ``job:<parent id>`` and a
    tenant rule that answers None falls back to the parent's tenant."""

    pk: str
    tenant_id: str | None


def spawn(
    journal: Journal, name: str, handle: object, kwargs: dict[str, Any]
) -> Enqueued:
    """Enqueue ``handle(**kwargs)`` as the child step ``name``; answer its ids (S10)."""
    [answer] = spawn_batch(journal, [name], handle, [kwargs])
    return answer


def spawn_many(
    journal: Journal, name: str, handle: object, inputs: object
) -> list[Enqueued]:
    """Enqueue one child per input as the steps ``name[0]``, ``name[1]``...: every
    child and checkpoint in ONE transaction and two statements (S10)."""
    if isinstance(inputs, (str, bytes, dict)) or not isinstance(inputs, Iterable):
        raise InvalidArgument(
            "inputs",
            inputs,
            "a list of dicts of keyword arguments, one per child",
            job=journal.definition.name,
        )
    given = list(inputs)
    return spawn_batch(
        journal, [f"{name}[{i}]" for i in range(len(given))], handle, given
    )


def spawn_batch(
    journal: Journal, names: list[str], handle: object, inputs: list[Any]
) -> list[Enqueued]:
    """Spawn the children whose steps are not recorded yet, in one transaction, and
    answer every child's ids, recorded or new, in order."""
    stored = [journal.enter(name, "spawn") for name in names]
    new = [i for i, found in enumerate(stored) if found is None]
    answers = {i: _enqueued(found.output) for i, found in enumerate(stored) if found}
    if new:
        for index, written in zip(
            new,
            _spawn(journal, [names[i] for i in new], handle, [inputs[i] for i in new]),
            strict=True,
        ):
            answers[index] = written
    return [answers[i] for i in range(len(names))]


def _spawn(
    journal: Journal, names: list[str], handle: object, inputs: list[Any]
) -> list[Enqueued]:
    if not isinstance(handle, JobHandle):
        raise InvalidArgument(
            "handle",
            handle,
            "a job (a function decorated with @job, or its .using(...) copy)",
            job=journal.definition.name,
        )
    journal.refuse_to_start(names[0])
    parent = journal.job
    child = handle
    if handle.options.actor is None:
        child = handle.using(
            actor=_Parent(pk=f"job:{parent['id']}", tenant_id=parent["tenant_id"])
        )
    settings = get_settings()
    rows = build_rows(child, inputs)
    targets = [settings.database_for(row.queue) for row in rows]
    # A child staged for another alias carries its parent: the relay writes it there
    # with parent_id (a child here is adopted by spawn_record, if not deduped).
    rows = [
        row if target == journal.alias else row._replace(parent_id=parent["id"])
        for row, target in zip(rows, targets, strict=True)
    ]
    with transaction.atomic(using=journal.alias):
        journal.atomic_db.run(QUERIES["spawn_commit_async"])
        answers = _write_children(journal, handle.name, rows, targets)
        outputs = [
            json.dumps({"id": str(a.id), "run_id": str(a.run_id), "deduped": a.deduped})
            for a in answers
        ]
        journal.refuse_to_record(names[0])
        written = journal.write(
            "spawn_record",
            db=journal.atomic_db,
            names=names,
            child_ids=[a.id for a in answers],
            adopt=[
                target == journal.alias and not a.deduped
                for target, a in zip(targets, answers, strict=True)
            ],
            outputs=outputs,
        )
    recorded = {row["name"]: json.loads(row["output"]) for row in written}
    for name in names:
        journal.remember(name, "spawn", "done", recorded[name], None)
    spawned = [_enqueued(recorded[name]) for name in names]
    # jobs.enqueued and job_enqueued (P4), once the children exist, as for any enqueue
    announce(handle, rows, spawned, staged=any(t != journal.alias for t in targets))
    return spawned


def _write_children(
    journal: Journal, job: str, rows: list[EnqueueRow], targets: list[str]
) -> list[Enqueued]:
    """Write the child rows in the caller's transaction: on the parent's alias with
    job_enqueue, for another alias (Q1) staged in the outbox here, published there by
    the relay under the same ids; answers one Enqueued per row, in order."""
    answers: list[Enqueued | None] = [None] * len(rows)
    for target in dict.fromkeys(targets):
        indexes = [i for i, t in enumerate(targets) if t == target]
        part = [rows[i] for i in indexes]
        if target == journal.alias:
            written = publish(journal.atomic_db, part)
        else:
            written = outbox.stage(
                journal.atomic_db, part, job=job, holders=DjangoDatabase(target)
            )
        for index, answer in zip(indexes, written, strict=True):
            answers[index] = answer
    return [a for a in answers if a is not None]


def wait_for_jobs(
    journal: Journal,
    name: str,
    children: object,
    timeout: Duration | None,
) -> list[Outcome]:
    """Suspend until every child has settled; answer their outcomes in order (S11)."""
    job = journal.definition.name
    ids = child_ids(children, job=job)
    seconds = optional_duration(timeout, field="timeout", job=job)
    stored = journal.enter(name, "jobs")
    if stored is not None and stored.status != "waiting":
        return _answer(job, name, stored.status, stored.output)
    journal.refuse_to_park(name)
    rows = journal.write(
        "fanin_wait",
        name=name,
        children=json.dumps([str(i) for i in ids]),
        timeout=seconds,
    )
    deadline, expired = rows[0]["wake_at"], rows[0]["expired"]
    with transaction.atomic(using=journal.alias):
        journal.atomic_db.run(QUERIES["fanin_lock"], id=journal.job["id"])
        outcomes = read_outcomes(journal.atomic_db, journal.alias, ids)
        status = (
            "done"
            if all(o["state"] in SETTLED or o["state"] == MISSING for o in outcomes)
            else "timed_out"
            if expired
            else None
        )
        if status is not None:
            ended = journal.write(
                "fanin_end",
                db=journal.atomic_db,
                name=name,
                status=status,
                output=json.dumps(outcomes if status == "done" else None),
            )
    if status is None:
        journal.suspend(
            RunSuspended(
                name,
                wake_at=deadline,
                poll=journal.definition.event_poll,
                waiting=True,
            )
        )
    output = json.loads(ended[0]["output"])
    journal.remember(name, "jobs", ended[0]["status"], output, deadline)
    return _answer(job, name, ended[0]["status"], output)


def child_ids(children: object, *, job: str) -> list[uuid.UUID]:
    """The ids of ``children``: ``Enqueued`` answers, UUIDs or their text."""
    if isinstance(children, (str, bytes)) or not isinstance(children, Iterable):
        raise InvalidArgument(
            "children",
            children,
            "a list of run.spawn answers (Enqueued) or job ids",
            job=job,
        )
    ids = []
    for index, child in enumerate(children):
        value = child.id if isinstance(child, Enqueued) else child
        try:
            ids.append(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
        except ValueError:
            raise InvalidArgument(
                f"children[{index}]",
                child,
                "a run.spawn answer (Enqueued) or a job id",
                job=job,
            ) from None
    return ids


def read_outcomes(
    db: Database, alias: str, ids: Sequence[uuid.UUID]
) -> list[dict[str, Any]]:
    """Where every id is: on ``alias`` (read through ``db``) first, then on each other
    alias (Q1); an id in no table of any alias and staged in no outbox is ``missing``."""
    found: dict[int, Row] = {}
    pending = list(range(len(ids)))
    for other in [alias, *(a for a in get_settings().aliases if a != alias)]:
        if not pending:
            break
        reader = db if other == alias else DjangoDatabase(other)
        rows = reader.run(QUERIES["fanin_outcomes"], ids=[ids[i] for i in pending])
        left = []
        for index, row in zip(pending, rows, strict=True):
            if row["found"] or row["staged"]:
                found[index] = row
            else:
                left.append(index)
        pending = left
    return [_outcome_json(ids[i], found.get(i)) for i in range(len(ids))]


def _outcome_json(child: uuid.UUID, row: Row | None) -> dict[str, Any]:
    if row is None:
        return {"id": str(child), "state": MISSING, "result": None, "error": None}
    state = row["state"] if row["found"] else "staged"
    error = row["error"] or None if state != "done" else None
    result = None if row["result"] is None else json.loads(row["result"])
    return {"id": str(child), "state": state, "result": result, "error": error}


def _answer(job: str, name: str, status: str, output: Any) -> list[Outcome]:
    if status == "timed_out":
        raise FanInTimeout(job, name)
    return [
        Outcome(uuid.UUID(o["id"]), o["state"], o["result"], o["error"]) for o in output
    ]


def _enqueued(output: dict[str, Any]) -> Enqueued:
    return Enqueued(
        uuid.UUID(output["id"]), uuid.UUID(output["run_id"]), bool(output["deduped"])
    )
