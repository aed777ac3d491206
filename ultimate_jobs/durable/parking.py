"""The verbs that park a run (S3, S4): ``run.sleep`` records its wake time once and
``run.wait_for_event`` its event, match and deadline once, then each suspends the run
by raising ``RunSuspended`` (no attempt spent); on wake the body replays from the top
and the verb answers (the sleep returns, the wait answers the payload or times out).

They write through the attempt's journal (steps.Journal, which calls this module: a
protocol here, so the two modules do not import each other).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn, Protocol

from ultimate_jobs.db import Database, Row
from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.durable.record import (
    Stored,
    check_name,
    decode,
    encode_output,
    sleep_name,
)
from ultimate_jobs.ground.durations import (
    Duration,
    optional_duration,
    parse_duration,
)
from ultimate_jobs.ground.exceptions import (
    EventTimeout,
    InvalidArgument,
    RunSuspended,
)
from ultimate_jobs.sql import QUERIES


class Journal(Protocol):
    """What parking uses of the attempt's journal."""

    db: Database
    definition: JobDefinition
    now: Callable[[], Any]

    def enter(self, name: str, kind: str) -> Stored | None: ...
    def refuse_to_park(self, name: str) -> None: ...
    def write(self, query: str, **params: Any) -> list[Row]: ...
    def suspend(self, suspension: RunSuspended) -> NoReturn: ...
    def claim(self) -> dict[str, Any]: ...
    def remember(
        self, name: str, kind: str, status: str, output: Any, wake_at: Any
    ) -> None: ...


def sleep(
    journal: Journal, name_or_duration: str | Duration, duration: Duration | None
) -> None:
    """Suspend the run until the clock passes the sleep's wake time (S3)."""
    job = journal.definition.name
    if duration is None:
        duration, name = name_or_duration, sleep_name(name_or_duration)
    else:
        name = check_name(name_or_duration)
    seconds = parse_duration(duration, field="duration", job=job)
    stored = journal.enter(name, "sleep")
    if stored is not None and stored.status == "done":
        return
    journal.refuse_to_park(name)
    if stored is None:
        rows = journal.write("step_sleep", name=name, seconds=seconds)
        journal.suspend(RunSuspended(name, wake_at=rows[0]["wake_at"]))
    if journal.db.run(
        QUERIES["step_wake"], **journal.claim(), name=name, now=journal.now()
    ):
        journal.remember(name, "sleep", "done", None, stored.wake_at)
        return
    journal.suspend(RunSuspended(name, wake_at=stored.wake_at))


def wait_for_event(
    journal: Journal,
    name: str,
    event: str,
    *,
    match: Mapping[str, Any] | None = None,
    timeout: Duration | None = None,
    timeout_ok: bool = False,
) -> Any:
    """Answer the payload of the first matching publication, suspending until one
    comes (S4); at the timeout raise EventTimeout, or answer None with timeout_ok."""
    job = journal.definition.name
    check_name(event, "event")
    wanted = _match(job, match)
    seconds = optional_duration(timeout, field="timeout", job=job)
    stored = journal.enter(check_name(name), "event")
    if stored is not None and stored.status != "waiting":
        return _answer(job, name, event, stored.status, stored.output, timeout_ok)
    journal.refuse_to_park(name)
    if stored is None:
        journal.write(
            "step_wait", name=name, event=event, match=wanted, timeout=seconds
        )
    rows = journal.write("step_take_event", name=name)
    status, output = rows[0]["status"], decode(rows[0]["output"])
    if status == "waiting":
        journal.suspend(
            RunSuspended(
                name,
                wake_at=rows[0]["wake_at"],
                poll=journal.definition.event_poll,
                waiting=True,
            )
        )
    journal.remember(name, "event", status, output, rows[0]["wake_at"])
    return _answer(job, name, event, status, output, timeout_ok)


def _answer(
    job: str,
    name: str,
    event: str,
    status: str,
    output: Any,
    timeout_ok: bool,  # noqa: FBT001 - internal
) -> Any:
    if status == "timed_out":
        if timeout_ok:
            return None
        raise EventTimeout(job, name, event)
    return output


def _match(job: str, match: Mapping[str, Any] | None) -> str:
    if match is None:
        return "{}"
    if not isinstance(match, Mapping):
        raise InvalidArgument(
            "match", match, "a dict the payload must contain", job=job
        )
    return encode_output(job, "match", dict(match))
