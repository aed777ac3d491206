"""The rows of the hot statements, typed: the SQL-to-Python contract mypy can check.

Each ``TypedDict`` here lists, in order, the columns one named statement answers, and
``typed(name, Row)`` answers that statement as a ``Query[Row]``, so ``db.run`` returns
``list[Row]`` and a misspelt or missing column is a type error where it is read. A test
(tests/integration/test_sql_contract.py) asks PostgreSQL to describe each statement
and checks the names, order and types against these declarations.

``jsonb`` columns arrive as text or as decoded JSON depending on the connection's
adapters (Django's connection loads them as text), so they are typed as both.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypedDict, TypeVar, cast

from ultimate_jobs.sql import QUERIES, Query

R = TypeVar("R")
Json = str | dict[str, Any]

ROW_TYPES: dict[str, type[Any]] = {}


def typed(name: str, row: type[R]) -> Query[R]:
    """The statement ``name``, declared to answer rows of type ``row``."""
    ROW_TYPES[name] = row
    return cast(Query[R], QUERIES[name])


# -- the claim and the lease of a run (W2-W5) ------------------------------------------


class ClaimedJob(TypedDict):
    """A row ``job_claim`` / ``job_claim_plain`` answers: a run to execute, or one the
    claim itself ended (refused)."""

    refused: bool  # L2: when_busy="fail" over a busy key; settled failed by the claim
    id: uuid.UUID
    run_id: uuid.UUID
    name: str
    queue: str
    priority: int
    state: str
    input: str  # the JSON text (a jsonb answered ::text: read in C, N2)
    tenant_id: str | None
    idempotency_key: str
    attempt: int
    max_attempts: int
    lease_owner: uuid.UUID  # the claim token every later write is fenced on (W3)
    correlation_id: str
    enqueued_by: str
    created_at: datetime
    started_at: datetime | None
    lease_key: str | None  # the slot key of a capped job (L1, L2)


class Staged(TypedDict):
    """A row ``job_stage`` answers: what the pass did, and one row it buried (W5) or
    NULLs when it buried none."""

    staged: int  # rows made ready: due delayed/suspended, lapsed leases
    ready: bool  # a due ready row of a declared name waits in a served queue
    registered: bool  # the worker's registry row was carried and refreshed (W8)
    drain: bool  # an operator asked the carrying worker to drain (issue 15)
    led: bool  # the process's leader lease was carried and renewed (C3)
    schedules_revision: str | None  # as leader_acquire answers it, when led
    db_now: datetime  # the pass's clock
    outbox: bool  # a row outbox_claim would take waits (O2; false when not asked)
    id: uuid.UUID | None
    run_id: uuid.UUID | None
    name: str | None
    queue: str | None
    priority: int | None
    state: str | None
    input: str | None  # the JSON text, as ClaimedJob's
    tenant_id: str | None
    idempotency_key: str | None
    attempt: int | None
    max_attempts: int | None
    lease_owner: uuid.UUID | None
    correlation_id: str | None
    enqueued_by: str | None
    created_at: datetime | None
    started_at: datetime | None


class Fence(TypedDict):
    """What a fenced write of a run matches on (W3): its id and its claim token.
    A ClaimedJob is one."""

    id: uuid.UUID
    lease_owner: uuid.UUID


class Heartbeat(TypedDict):
    """A row ``job_heartbeat`` answers: one held run, renewed or not (W4)."""

    id: uuid.UUID
    renewed: bool
    state: str | None
    slots: int


class JobId(TypedDict):
    """A row of a fenced settle (complete, bury, release): the id it moved."""

    id: uuid.UUID


class Settled(TypedDict):
    """A row ``job_complete`` / ``job_bury`` answers: the id it settled and, for a
    child whose parent is not on this alias (S11, Q1), the parent to wake there."""

    id: uuid.UUID
    away_parent_id: uuid.UUID | None


class Retried(TypedDict):
    """A row ``job_retry`` answers: the id it moved and when it runs again."""

    id: uuid.UUID
    run_at: datetime


JOB_CLAIM = typed("job_claim", ClaimedJob)
JOB_CLAIM_PLAIN = typed("job_claim_plain", ClaimedJob)
JOB_STAGE = typed("job_stage", Staged)
JOB_HEARTBEAT = typed("job_heartbeat", Heartbeat)
JOB_COMPLETE = typed("job_complete", Settled)
JOB_RETRY = typed("job_retry", Retried)
JOB_BURY = typed("job_bury", Settled)
JOB_RELEASE = typed("job_release", JobId)
JOB_RESULT_KEEP = typed("job_result_keep", JobId)


# -- enqueue and the outbox relay (H3, O1-O3) -------------------------------------------


class Inserted(TypedDict):
    """A row ``outbox_stage`` answers: one id it wrote."""

    id: uuid.UUID
    announced: int


class Enqueue(TypedDict):
    """The one row ``job_enqueue`` answers: the ordinals (1-based) of the input rows it
    did not write (a live key or an existing id holds them, J2), and the wakes sent."""

    announced: int
    deduped: list[int]


class EnqueueOne(TypedDict):
    """The one row ``job_enqueue_one`` answers: whether its row was written."""

    inserted: bool
    announced: int


class Holder(TypedDict):
    """A row ``job_holders`` answers: which job holds input ``ord``'s place (J2)."""

    ord: int
    id: uuid.UUID
    run_id: uuid.UUID


class StagedJob(TypedDict):
    """A row ``outbox_claim`` answers: a committed job to publish, under its own ids."""

    id: uuid.UUID
    run_id: uuid.UUID
    name: str
    queue: str
    priority: int
    input: str
    tenant_id: str | None
    idempotency_key: str
    max_attempts: int
    run_at: datetime
    correlation_id: str
    enqueued_by: str
    concurrency_key: str | None
    redact: str | None  # JSON text of the declared paths (B5)
    shown_key: str | None
    parent_id: uuid.UUID | None  # S10, Q1: the spawning job of a staged child
    staged_at: datetime
    claimed_by: str
    claims: int


class OutboxId(TypedDict):
    """A row of a fenced outbox write (mark published, release)."""

    id: uuid.UUID


class Delivered(TypedDict):
    """A row ``outbox_deliver`` answers: an id received now, and whether its job was
    written (False: a live job holds its key, J2)."""

    id: uuid.UUID
    inserted: bool
    announced: int


JOB_ENQUEUE = typed("job_enqueue", Enqueue)
JOB_ENQUEUE_MANY = typed("job_enqueue_many", Enqueue)
JOB_ENQUEUE_ONE = typed("job_enqueue_one", EnqueueOne)
JOB_HOLDERS = typed("job_holders", Holder)
OUTBOX_STAGE = typed("outbox_stage", Inserted)
OUTBOX_CLAIM = typed("outbox_claim", StagedJob)
OUTBOX_MARK_PUBLISHED = typed("outbox_mark_published", OutboxId)
OUTBOX_RELEASE = typed("outbox_release", OutboxId)
OUTBOX_DELIVER = typed("outbox_deliver", Delivered)


# -- the scheduler (C3-C9) ---------------------------------------------------------------


class LeaderTerm(TypedDict):
    """A row ``leader_acquire`` answers: who leads, and for how long (C3)."""

    holder: str
    term: int
    acquired: bool
    expires_in: float
    schedules_revision: str | None
    db_now: datetime  # the database's clock (C9)


class LeaderReleased(TypedDict):
    role: str
    announced: bool


class Watermark(TypedDict):
    """A row ``scheduler_sync`` answers: where a task's watermark stands (C4)."""

    key: str
    last_occurrence: datetime
    paused: bool
    restarted: bool


class Fired(TypedDict):
    """The row ``scheduler_fire`` answers: what the one firing statement did (C4)."""

    status: str  # fired | early | paused | not-leader | missing | moved
    current: datetime | None
    inserted_ids: list[uuid.UUID]
    announced: int
    db_now: datetime  # the database's clock (C9)


class StoredSchedule(TypedDict):
    """A row ``schedule_list`` answers: one runtime schedule (C6)."""

    key: str
    job: str
    input: Json
    cron: str
    tz: str
    catch_up: str
    max_catch_up: int


LEADER_ACQUIRE = typed("leader_acquire", LeaderTerm)
LEADER_RELEASE = typed("leader_release", LeaderReleased)
SCHEDULER_SYNC = typed("scheduler_sync", Watermark)
SCHEDULER_FIRE = typed("scheduler_fire", Fired)
SCHEDULE_LIST = typed("schedule_list", StoredSchedule)


# -- the operator console (P7) ---------------------------------------------------------


class QueueStateCount(TypedDict):
    """A row ``queue_overview`` answers: one (queue, state) of the watched states."""

    queue: str
    state: str
    jobs: int
    due: int
    oldest_due_seconds: float | None


QUEUE_OVERVIEW = typed("queue_overview", QueueStateCount)
