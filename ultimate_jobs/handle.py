"""The handle a @job declaration answers: enqueue, using, enqueue_many, describe (H1-H4)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from ultimate_jobs.declarations import JobDefinition, check_priority
from ultimate_jobs.durations import parse_duration
from ultimate_jobs.exceptions import InvalidArgument
from ultimate_jobs.queues import validate_queue

OnConflict = Literal["return", "error"]


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue answers: the job's ids, known on every path (H1)."""

    id: uuid.UUID
    run_id: uuid.UUID
    deduped: bool = False


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


def _options(
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
            if value is not None and (
                not isinstance(value, datetime) or value.tzinfo is None
            ):
                raise InvalidArgument(
                    "run_at", value, "an aware datetime (with a time zone)", job=job
                )
            changes[key] = value
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


class JobHandle:
    """The surface of one declared job: put it on the queue, or describe it."""

    __slots__ = ("definition", "options")

    def __init__(
        self, definition: JobDefinition, options: EnqueueOptions | None = None
    ) -> None:
        self.definition = definition
        self.options = options or EnqueueOptions()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def func(self) -> Any:
        """The decorated function, for unit tests that call the body with a fake run."""
        return self.definition.func

    def using(self, **options: Any) -> JobHandle:
        """A handle with per-call options: delay, run_at, queue, priority, run_id,
        actor, on_conflict ("return" answers the live job; "error" raises JobDuplicate)."""
        return JobHandle(self.definition, _options(self.options, options, self.name))

    def enqueue(self, **kwargs: Any) -> Enqueued:
        """Put one run on the queue; answers its ids (deduped=True for a held key)."""
        from ultimate_jobs.enqueue import enqueue_inputs

        return enqueue_inputs(self, [kwargs], single=True)[0]

    def enqueue_many(
        self, inputs: Iterable[Mapping[str, Any]], **options: Any
    ) -> list[Enqueued]:
        """Put many runs on the queue in one statement; one answer per input, in order."""
        from ultimate_jobs.enqueue import enqueue_inputs

        handle = self.using(**options) if options else self
        if handle.options.run_id is not None:
            raise InvalidArgument(
                "run_id",
                handle.options.run_id,
                "run_id names one run; not for enqueue_many",
                job=self.name,
            )
        return enqueue_inputs(handle, list(inputs), single=False)

    def describe(self) -> dict[str, Any]:
        """The manifest entry for this job (J7)."""
        return self.definition.describe()

    def __repr__(self) -> str:
        return f"<JobHandle {self.name}>"
