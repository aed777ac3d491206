"""``run.reschedule(delay=..., run_at=..., input=...)`` (S5): a staged job.

Calling it records an intent and the body goes on; when the body returns, the same row
goes back to the queue as a new stage: the new input, due after ``delay`` (or at
``run_at``), attempt reset to 0 so each stage has the whole retry budget, id, run id and
idempotency key kept (the key is not recomputed from the new input). The finished
stage's steps are archived, so the next stage replays none of them. The input is checked
against the job's signature when reschedule is called; a body that raises afterwards
takes the retry path on the old input and the intent is dropped. Called twice, the last
call wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.declaration.redaction import cached_redaction
from ultimate_jobs.ground.bounds import check_instant
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.sql.rows import Json


@dataclass(frozen=True, slots=True)
class Reschedule:
    """The next stage: its input (JSON text) and when it is due."""

    input: str
    delay: float  # seconds from the settle; 0 = at once
    run_at: datetime | None = None


def reschedule_intent(
    definition: JobDefinition,
    stored_input: Json,
    *,
    delay: object = None,
    run_at: object = None,
    input: Mapping[str, Any] | None = None,
) -> Reschedule:
    """Check a reschedule call and answer the stage it asks for; ``stored_input`` is
    the run's current input, kept when the call gives none."""
    name = definition.name
    seconds = 0.0
    if delay is not None and delay != 0 and delay != timedelta(0):
        seconds = parse_duration(delay, field="delay", job=name)
    if run_at is not None:
        if not isinstance(run_at, datetime) or run_at.utcoffset() is None:
            raise InvalidArgument(
                "run_at", run_at, "an aware datetime (with a time zone)", job=name
            )
        if seconds:
            raise InvalidArgument(
                "delay", delay, "give delay or run_at, not both", job=name
            )
        check_instant(run_at, field="run_at", job=name)  # B4
    settings = get_settings()
    redaction = cached_redaction(definition.redact, settings.REDACT)
    bounds: dict[str, Any] = {
        "max_bytes": settings.MAX_INPUT_BYTES,
        "max_depth": settings.MAX_INPUT_DEPTH,
        "redaction": redaction,
        "version": definition.version,
    }
    if input is None:
        current = payload.decode(
            name,
            definition.signature,
            stored_input,
            max_depth=settings.MAX_INPUT_DEPTH,
            redaction=redaction,
            version=definition.version,
            upgrade=definition.upgrade,
        )
        encoded = payload.encode(name, definition.signature, current, **bounds)
    elif not isinstance(input, Mapping):
        raise InvalidArgument(
            "input",
            redaction.apply(input),
            "a dict of keyword arguments for the job",
            job=name,
        )
    else:
        encoded = payload.encode(name, definition.signature, dict(input), **bounds)
    return Reschedule(
        encoded, seconds, run_at if isinstance(run_at, datetime) else None
    )
