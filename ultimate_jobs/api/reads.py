"""Read-only views of the queue for operators (P1, P3): job pages, queue stats, workers.

Pages are keyset-paginated on the time-ordered id (never OFFSET), newest first, so a
million-row table answers a page as fast as a small one. Everything here answers plain
JSON-friendly dicts: ``manage.py jobs ... --json`` prints them as they are.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.functions import Cast, Now

from ultimate_jobs.api import locator
from ultimate_jobs.api.attribution import display_names
from ultimate_jobs.api.history import attempts_json
from ultimate_jobs.backfills import ledger
from ultimate_jobs.conf import get_settings, reading_aliases
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.ground.exceptions import InvalidArgument, JobNotFound, JobPageInvalid
from ultimate_jobs.models import (
    LIVE_STATES,
    Job,
    JobAction,
    JobArchive,
    JobState,
    Worker,
)
from ultimate_jobs.models.archive import as_job
from ultimate_jobs.observability import metrics, runlogs
from ultimate_jobs.observability.redaction import shown_row
from ultimate_jobs.observability.triage import check_fingerprint
from ultimate_jobs.sql import QUERIES

DEFAULT_PAGE = 100
MAX_PAGE = 200


def parse_job_id(value: object, field: str = "id") -> uuid.UUID:
    """A job id from a UUID or its text; anything else is InvalidArgument."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument(field, value, "a job id is a UUID") from None


def resolve_id(value: object) -> uuid.UUID:
    """A job id from a UUID, or from the first 8 or more hex digits of exactly one
    job's id (``jobs show 01a23311-5dd``); anything else is InvalidArgument."""
    text = str(value).strip().lower()
    digits = text.replace("-", "")
    if (
        len(digits) == 32
        or not (8 <= len(digits) < 32)
        or not all(c in "0123456789abcdef" for c in digits)
    ):
        return parse_job_id(value)
    low = uuid.UUID(digits.ljust(32, "0"))
    high = uuid.UUID(digits.ljust(32, "f"))
    found = sorted(
        {
            pk
            for rows in (_jobs(), _archive())
            for pk in rows.filter(id__gte=low, id__lte=high)
            .order_by("id")
            .values_list("id", flat=True)[:2]
        }
    )[:2]
    if len(found) == 1:
        return found[0]
    if not found:
        raise JobNotFound(text)
    raise InvalidArgument(
        "id", value, "more than one job's id begins with it: give more digits"
    )


def find_job(job_id: uuid.UUID) -> Job:
    """The job row on whichever alias holds it (Q1), from the hot table, else from
    the archive (Q2): api/locator.py, ``load``. A value that is not a job id is
    refused with InvalidArgument (issue 31: a text id gave Django's ValidationError)."""
    return locator.load(parse_job_id(job_id))


def get(job_id: object) -> dict[str, Any]:
    """One job as the stable JSON of ``manage.py jobs show --json`` (P3), with what
    only the detail shows: ``logs``, the lines each attempt kept (oldest first), and
    ``attempts``, the attempt history (P6, oldest first)."""
    job = find_job(parse_job_id(job_id))
    out = job_json(job)
    out["attempts"] = attempts_json(job)
    out["logs"] = runlogs.as_json(job.logs.all())  # ordered by id (RunLog.Meta)
    return out


def backfill_json(row: ledger.LedgerRow | None) -> dict[str, Any] | None:
    """The ledger row of the pass a backfill's job sweeps (F2), or None."""
    if row is None:
        return None
    return {
        "pass": row.id,
        "name": row.name,
        "status": row.status,
        "batches": row.batches,
        "rows": row.rows,
        "checksum": row.checksum,
        "in_flight": row.status in ("pending", "running"),
    }


def job_json(
    job: Job,
    *,
    names: dict[str, str] | None = None,
    passes: dict[uuid.UUID, ledger.LedgerRow] | None = None,
    actions: list[JobAction] | None = None,
) -> dict[str, Any]:
    """The documented JSON shape of a job (docs/operations.md).

    What the input holds is shown redacted (B5): ``input`` per the job's declared
    paths and the REDACT patterns, and the input's redacted values in ``last_error``
    and ``progress`` too (observability/redaction.py). ``names`` (display names by
    ``enqueued_by``), ``passes`` (backfill passes by job id) and ``actions`` (who moved
    the job from an operator surface, P2, oldest first) are read here when not given;
    a page reads them once for all its jobs.
    """
    if names is None:
        names = display_names([job.enqueued_by])
    if passes is None:
        passes = ledger.by_job([job.id])
    if actions is None:
        actions = list(
            JobAction.objects.using(job._state.db or get_settings().DATABASE)
            .filter(job_id=job.id)
            .order_by("id")
        )
    view = shown_row(job)
    declared = registry.get(job.name) if job.name in registry else None

    def when(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    out: dict[str, Any] = {
        "id": str(job.id),
        "run_id": str(job.run_id),
        "name": job.name,
        "queue": job.queue,
        "priority": job.priority,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "tenant_id": job.tenant_id,
        "idempotency_key": view.key(job.idempotency_key),
        "input": view.input,
        "run_at": when(job.run_at),
        "created_at": when(job.created_at),
        "started_at": when(job.started_at),
        "finished_at": when(job.finished_at),
        "last_error": view.text(job.last_error),
        "error_code": job.error_code,
        "fingerprint": job.fingerprint,  # P10: of the last failed attempt
        "stop_reason": job.stop_reason,
        "progress": view.value(job.progress),
        "correlation_id": view.text(job.correlation_id),
        "enqueued_by": job.enqueued_by,
        "enqueued_by_name": names.get(job.enqueued_by),
        "worker_id": job.worker_id,
        "backfill": backfill_json(passes.get(job.id)),
        "actions": [action_json(action) for action in actions],
        # The current stage's steps, oldest first (prefetch_related("steps") in lists).
        "steps": [
            {
                "name": step.name,
                "kind": step.kind,
                "state": step.status,
                "started": when(step.started_at),
                "finished": when(step.finished_at),
            }
            for step in job.steps.all()
            if not step.archived
        ],
    }
    if declared is not None and declared.definition.store_result:
        out["result"] = view.value(job.result)  # P8: only for jobs that opt in
    out.update(family_json(job))
    return out


CHILDREN_SHOWN = 1000


def family_aliases(alias: str) -> list[str]:
    """Where a job's children may live (S10, Q1): its own alias, then every other alias
    with jobs tables (a child whose queue is routed there is published there by the
    relay, with its parent_id)."""
    return [alias, *(other for other in get_settings().aliases if other != alias)]


def family_tables(alias: str) -> list[tuple[str, QuerySet[Any]]]:
    """The hot and finished jobs tables (Q2) of every alias in ``family_aliases``, each
    with its alias: where a job's parent and children are looked for."""
    return [
        (each, table)
        for each in family_aliases(alias)
        for table in (Job.objects.using(each), JobArchive.objects.using(each))
    ]


def family_json(job: Job) -> dict[str, Any]:
    """S11: the job's parent and children: ``parent_id``, ``children`` (ids, oldest
    first, at most CHILDREN_SHOWN) and ``children_by_state`` (counts), on the job's
    alias and every other alias with jobs tables (Q1), in the hot table and the
    finished jobs table (Q2)."""
    alias = job._state.db or get_settings().DATABASE
    tables = [table.filter(parent_id=job.id) for _, table in family_tables(alias)]
    counts: dict[str, int] = {}
    ids: list[uuid.UUID] = []
    for table in tables:
        for row in table.values("state").annotate(n=Count("id")).order_by():
            counts[row["state"]] = counts.get(row["state"], 0) + row["n"]
        ids.extend(table.order_by("id").values_list("id", flat=True)[:CHILDREN_SHOWN])
    return {
        "parent_id": str(job.parent_id) if job.parent_id else None,
        "children": [str(i) for i in sorted(ids)[:CHILDREN_SHOWN]],
        "children_by_state": dict(sorted(counts.items())),
    }


def _jobs() -> QuerySet[Job]:
    return Job.objects.using(get_settings().DATABASE)


def _archive() -> QuerySet[JobArchive]:
    return JobArchive.objects.using(get_settings().DATABASE)


def list_jobs(
    *,
    state: str | None = None,
    queue: str | None = None,
    name: str | None = None,
    tenant: str | None = None,
    key: str | None = None,
    id_prefix: str | None = None,
    parent: str | uuid.UUID | None = None,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
    fingerprint: str | None = None,
    limit: int = DEFAULT_PAGE,
    after: str | uuid.UUID | None = None,
    before: str | uuid.UUID | None = None,
) -> dict[str, Any]:
    """One page of jobs, newest first (P3).

    A row Python cannot read (B4) is left out of ``jobs`` and named in ``unreadable``
    (its id and why); the page and its cursors count it like any row. ``next`` is the
    cursor of the following (older) page, to pass as ``after``; ``previous`` that of
    the page before it (newer), to pass as ``before``; each is None when there is no
    such page. ``fingerprint`` keeps the jobs whose last failed attempt has it (P10).
    ``key`` is an idempotency key, ``created_from`` (inclusive) and ``created_to``
    (exclusive) bound the creation time. A page holds at most MAX_PAGE jobs; a larger
    one, a cursor that is not a job id, or both cursors at once are JobPageInvalid.
    """
    validate.whole(
        limit,
        field="limit",
        most=MAX_PAGE,
        error=JobPageInvalid,
        reason=f"a page holds 1 to {MAX_PAGE} jobs",
    )
    if after is not None and before is not None:
        raise JobPageInvalid(
            "before", before, "give one cursor: after (older jobs) or before (newer)"
        )
    for field, value, length in (
        ("queue", queue, 63),
        ("name", name, 200),
        ("tenant", tenant, 200),
        ("key", key, 512),
        ("id_prefix", id_prefix, 36),
    ):
        if value is not None:
            check_text(value, field=field, max_length=length)  # B1, B4
    filters = _filters(
        state=state,
        queue=queue,
        name=name,
        tenant_id=tenant,
        idempotency_key=key,
        created_from=created_from,
        created_to=created_to,
    )
    aliases = [get_settings().DATABASE]
    if parent is not None:  # S11: the children of one job, on every alias (Q1)
        filters &= Q(parent_id=parse_job_id(parent, "parent"))
        aliases = family_aliases(get_settings().DATABASE)
    tables: list[QuerySet[Any]] = []
    for alias in aliases:
        tables.append(Job.objects.using(alias))
        if state is None or state not in LIVE_STATES:
            tables.append(JobArchive.objects.using(alias))  # Q2: no live job there
    if fingerprint is not None:  # P10: the fingerprint index of each table
        filters &= Q(fingerprint=check_fingerprint(fingerprint))
    tables = [rows.filter(filters) for rows in tables]
    if id_prefix:
        prefix = id_prefix.lower()
        if not all(c in "0123456789abcdef-" for c in prefix):
            raise InvalidArgument(
                "id_prefix", id_prefix, "hexadecimal digits of a job id"
            )
        tables = [
            rows.annotate(id_text=Cast("id", TextField())).filter(
                id_text__startswith=prefix
            )
            for rows in tables
        ]
    page, older, newer = _pages(tables, limit, after, before)
    return _page_json(page, older=older, newer=newer)


def _page_json(page: list[Entry], *, older: bool, newer: bool) -> dict[str, Any]:
    """A page as list_jobs answers it: each readable job with who enqueued it, its
    backfill pass and its operator actions; the unreadable ones by id (B4); cursors."""
    read = [item for _, item in page if isinstance(item, Job)]
    names = display_names(job.enqueued_by for job in read)
    passes = ledger.by_job([job.id for job in read])
    actions: dict[uuid.UUID, list[JobAction]] = {job.id: [] for job in read}
    for action in (
        JobAction.objects.using(get_settings().DATABASE)
        .filter(job_id__in=list(actions))
        .order_by("id")
    ):
        actions[action.job_id].append(action)
    return {
        "jobs": [
            job_json(job, names=names, passes=passes, actions=actions[job.id])
            for job in read
        ],
        "unreadable": [
            {"id": str(pk), "error": item} for pk, item in page if isinstance(item, str)
        ],
        "next": str(page[-1][0]) if older else None,
        "previous": str(page[0][0]) if newer else None,
    }


def _filters(
    *,
    state: str | None,
    created_from: datetime | None,
    created_to: datetime | None,
    **equal: str | None,
) -> Q:
    """The list's filters as one Q; a state or a bound that cannot match is refused."""
    if state is not None and state not in JobState.values:
        raise InvalidArgument("state", state, f"one of {', '.join(JobState.values)}")
    filters = Q(**{field: value for field, value in equal.items() if value is not None})
    if state is not None:
        filters &= Q(state=state)
    for field, value, lookup in (
        ("created_from", created_from, "created_at__gte"),
        ("created_to", created_to, "created_at__lt"),
    ):
        if value is None:
            continue
        if not isinstance(value, datetime) or value.utcoffset() is None:
            raise InvalidArgument(field, value, "an aware datetime")
        filters &= Q(**{lookup: value})
    return filters


Entry = tuple[uuid.UUID, "Job | str"]  # a row, or the error of one Python cannot read


def _read(fetched: QuerySet[Any], *, newest_first: bool) -> list[Entry]:
    """The rows of a page, in id order; an unreadable one (B4) as its id and error;
    a row of the archive as a Job (Q2)."""
    read = [as_job(row) if isinstance(row, JobArchive) else row for row in fetched]
    skipped = getattr(fetched, "unreadable", [])
    if skipped:
        metrics.row_unreadable("job", len(skipped))
    entries: list[Entry] = [(job.id, job) for job in read]
    entries += [(uuid.UUID(str(pk)), error) for pk, error in skipped]
    entries.sort(key=lambda entry: entry[0], reverse=newest_first)
    return entries


def _pages(
    tables: list[QuerySet[Any]],
    limit: int,
    after: str | uuid.UUID | None,
    before: str | uuid.UUID | None,
) -> tuple[list[Entry], bool, bool]:
    """A page newest first over the hot table and the archive (Q2), whether older rows
    follow it and whether newer precede it: each table's page by id, merged (ids are
    unique across both: a move deletes the hot row in the statement that writes the
    archive one)."""
    if before is not None:
        # The page just newer than the cursor: read upwards, answer newest first.
        cursor = _cursor("before", before)
        page = sorted(
            (
                entry
                for rows in tables
                for entry in _read(
                    rows.filter(id__gt=cursor).order_by("id")[: limit + 1],
                    newest_first=False,
                )
            ),
            key=lambda entry: entry[0],
        )
        newer = len(page) > limit
        page = page[:limit][::-1]
        older = bool(page) and any(
            rows.filter(id__lt=page[-1][0]).exists() for rows in tables
        )
        return page, older, newer
    if after is not None:
        cursor = _cursor("after", after)
        tables_after = [rows.filter(id__lt=cursor) for rows in tables]
    else:
        tables_after = tables
    page = sorted(
        (
            entry
            for rows in tables_after
            for entry in _read(rows.order_by("-id")[: limit + 1], newest_first=True)
        ),
        key=lambda entry: entry[0],
        reverse=True,
    )
    older = len(page) > limit
    page = page[:limit]
    newer = (
        after is not None
        and bool(page)
        and any(rows.filter(id__gt=page[0][0]).exists() for rows in tables)
    )
    return page, older, newer


def action_json(row: JobAction) -> dict[str, Any]:
    """One operator action as ``jobs show --json`` carries it (P2)."""
    return {
        "action": row.action,
        "actor": {"id": row.actor_id, "name": row.actor_name, "source": row.source},
        "reason": row.reason,
        "at": row.at.isoformat(),
    }


def job_actions(job_id: object) -> list[dict[str, Any]]:
    """Who did what to a job, oldest first; a removed job's record included."""
    rows = JobAction.objects.using(get_settings().DATABASE).filter(
        job_id=parse_job_id(job_id)
    )
    return [action_json(row) for row in rows.order_by("id")]


def _cursor(field: str, value: str | uuid.UUID) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise JobPageInvalid(
            field,
            value,
            "a cursor is a job id a previous page answered as next (after) or "
            "previous (before)",
        ) from None


def queue_stats() -> list[dict[str, Any]]:
    """Per queue: jobs by state, the oldest ready job's age, whether it is paused, and
    the alias that holds it; every alias is read (Q1)."""
    queues: dict[str, dict[str, Any]] = {}
    for alias in reading_aliases():
        for row in DjangoDatabase(alias).run(QUERIES["queue_stats"]):
            entry = queues.setdefault(
                row["queue"],
                {
                    "queue": row["queue"],
                    "database": get_settings().database_for(row["queue"]),
                    "states": dict.fromkeys(JobState.values, 0),
                    "oldest_ready_seconds": None,
                    "paused": False,
                },
            )
            entry["paused"] = entry["paused"] or row["paused"]
            if row["state"] is not None:
                entry["states"][row["state"]] += row["jobs"]
            if row["oldest_ready_seconds"] is not None:
                entry["oldest_ready_seconds"] = max(
                    float(row["oldest_ready_seconds"]),
                    entry["oldest_ready_seconds"] or 0.0,
                )
    for entry in queues.values():
        entry["depth"] = entry["states"]["ready"]
    return [queues[q] for q in sorted(queues)]


def workers() -> list[dict[str, Any]]:
    """Every live worker: id, host, pid, queues, the job names its code declares (None
    when not recorded), slots, in-flight job ids, heartbeat,
    and the aliases it is registered on (Q1: one row per alias its queues live on)."""
    found: dict[str, dict[str, Any]] = {}
    for alias in reading_aliases():
        live = Worker.objects.using(alias).filter(expires_at__gt=Now())
        for w in live.order_by("id"):
            if w.id in found:
                found[w.id]["databases"].append(alias)
                found[w.id]["in_flight"] += w.in_flight
                continue
            found[w.id] = {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "queues": w.queues,
                "names": w.names,  # None: not recorded, may serve any name
                "slots": w.slots,
                "in_flight": list(w.in_flight),
                "started_at": w.started_at.isoformat(),
                "heartbeat_at": w.heartbeat_at.isoformat(),
                "databases": [alias],
            }
    return [found[worker_id] for worker_id in sorted(found)]
