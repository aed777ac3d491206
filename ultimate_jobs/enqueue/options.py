"""What an enqueue answers (H1) and the per-call options of ``.using()`` (H2), checked."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from ultimate_jobs.declaration.definition import JobDefinition, check_priority
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.ground.bounds import check_instant
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument

OnConflict = Literal["return", "error"]


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue answers: the job's ids, known on every path (H1)."""

    id: uuid.UUID
    run_id: uuid.UUID
    deduped: bool = False


_new = object.__new__
_slots = vars(Enqueued)  # each field's slot descriptor
_set_id, _set_run_id, _set_deduped = (
    _slots[name].__set__ for name in ("id", "run_id", "deduped")
)


def written(id: uuid.UUID, run_id: uuid.UUID) -> Enqueued:
    """``Enqueued(id, run_id)``, the answer of a written row, made through the slots
    themselves: half the cost of the frozen dataclass's ``__init__`` (an
    ``enqueue_many`` makes one per row; issue 26). Equal to it in every field."""
    made = _new(Enqueued)
    _set_id(made, id)
    _set_run_id(made, run_id)
    _set_deduped(made, False)  # noqa: FBT003 - a slot descriptor takes no keyword
    return made


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-call options (H2), checked when given."""

    delay: float = 0.0  # seconds from now
    run_at: datetime | None = None
    queue: str | None = None
    priority: int | None = None
    run_id: uuid.UUID | None = None
    actor: Any = None
    on_conflict: OnConflict = "return"


class Enqueueable(Protocol):
    """What the write path takes (rows.py, write.py): a declaration and the per-call
    options, the pair a ``JobHandle`` (or a ``.using()`` copy) carries; the write path
    imports no handle."""

    @property
    def definition(self) -> JobDefinition: ...

    @property
    def options(self) -> EnqueueOptions: ...

    @property
    def name(self) -> str: ...


def _run_at(value: object, job: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(
            "run_at", value, "an aware datetime (with a time zone)", job=job
        )
    return check_instant(value, field="run_at", job=job)  # B4


def check_options(
    base: EnqueueOptions, given: Mapping[str, Any], job: str
) -> EnqueueOptions:
    known = set(EnqueueOptions.__dataclass_fields__)
    if unknown := sorted(set(given) - known):
        raise InvalidArgument(
            unknown[0],
            given[unknown[0]],
            f"unknown option (known: {', '.join(sorted(known))})",
            job=job,
        )
    changes: dict[str, Any] = {}
    for key, value in given.items():
        if key == "delay":
            if value is None or value == 0 or value == timedelta(0):
                changes[key] = 0.0
            else:
                changes[key] = parse_duration(value, field="delay", job=job)
        elif key == "run_at":
            changes[key] = _run_at(value, job)
        elif key == "queue":
            changes[key] = None if value is None else validate_queue(value, job=job)
        elif key == "priority":
            changes[key] = (
                None
                if value is None
                else check_priority(value, job=job, error=InvalidArgument)
            )
        elif key == "run_id":
            if value is not None and not isinstance(value, uuid.UUID):
                try:
                    value = uuid.UUID(str(value))
                except ValueError:
                    raise InvalidArgument("run_id", value, "a UUID", job=job) from None
            changes[key] = value
        elif key == "on_conflict":
            if value not in ("return", "error"):
                raise InvalidArgument(
                    "on_conflict", value, "'return' or 'error'", job=job
                )
            changes[key] = value
        else:
            changes[key] = value
    merged = replace(base, **changes)
    if merged.delay and merged.run_at is not None:
        raise InvalidArgument(
            "delay", given.get("delay"), "give delay or run_at, not both", job=job
        )
    return merged
