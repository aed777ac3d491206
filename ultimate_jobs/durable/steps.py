"""Durable steps (S1-S4, S9): what ``run.step``, ``run.atomic_step``, ``run.sleep`` and
``run.wait_for_event`` do, for one attempt of one job (``run.spawn`` and
``run.wait_for_jobs``, S10-S11, are in workflows.py, on the same guards).

A ``Journal`` is the run's record in ``ultimate_jobs_step`` as one attempt sees it. The
step name is the replay key: a step recorded by an earlier attempt answers its stored
output without running again; a step runs, and its JSON result is written (fenced on
the claim, W3) before the call returns. A name used twice in one attempt is
``StepDuplicate``. Sleeps and waits record their wake time or deadline once and then
suspend the run by raising ``RunSuspended``, which the executor turns into a
suspension (no attempt spent); on wake the body replays from the top.

Step statements run on the executor's connection (a worker's handler thread owns one,
autocommit, so a checkpoint is durable when the call returns); ``atomic_step`` writes its
checkpoint on Django's connection for the jobs alias, the one the body's ORM writes use,
so the body's writes and the checkpoint commit in one transaction.

Past the run's cancel no new step starts (``JobAborted``). During a drain the row is
still this worker's: a step whose function has already returned is still recorded, and
a sleep or a wait still parks the run (which frees the worker, as the drain wants);
after a deadline, a lost lease or an operator's cancel they are refused (``JobAborted``).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, NoReturn

from django.db import DEFAULT_DB_ALIAS, transaction

from ultimate_jobs.db import Database, Row
from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.durable import parking, workflows
from ultimate_jobs.durable.deadlines import Deadlines
from ultimate_jobs.durable.progress import Progress
from ultimate_jobs.durable.record import Stored, check_name, decode, encode_output
from ultimate_jobs.durable.reschedule import Reschedule, reschedule_intent
from ultimate_jobs.ground.cancel import DRAINING, CancelToken
from ultimate_jobs.ground.durations import (
    Duration,
)
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    JobAborted,
    LeaseLost,
    RunSuspended,
    StepDuplicate,
)
from ultimate_jobs.observability import tracing
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)


def _takes_token(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` has a required positional parameter: it gets the cancel token."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        for p in parameters
    )


class Journal:
    """The durable record of one run, as one attempt reads and writes it."""

    def __init__(
        self,
        *,
        db: Database,
        atomic_db: Database,
        alias: str,
        job: ClaimedJob,
        definition: JobDefinition,
        token: CancelToken,
        deadlines: Deadlines | None,
        now: Callable[[], Any],
    ) -> None:
        self.db = db
        self.atomic_db = atomic_db
        self.alias = alias
        self.job = job
        self.definition = definition
        self.token = token
        # None: the job has no timeout and no step_timeout, so nothing can expire.
        self.deadlines = deadlines
        self.now = now
        self.suspension: RunSuspended | None = None
        self.rescheduled: Reschedule | None = None
        self.progress = Progress(self._write_progress, token)
        self._stored: dict[str, Stored] | None = None
        self._seen: set[str] = set()

    def _bounded(self, name: str) -> AbstractContextManager[None]:
        """The step's deadline (S6), when the job declares one."""
        if self.deadlines is None:
            return contextlib.nullcontext()
        return self.deadlines.step(name)

    # -- run.step / run.atomic_step ------------------------------------------------

    def step(self, name: str, fn: Callable[..., Any]) -> Any:
        """Run ``fn`` once ever for this job; answer its (stored) JSON result (S1)."""
        stored = self.enter(check_name(name), "step")
        if stored is not None:
            return stored.output
        self.refuse_to_start(name)
        started = time.monotonic()
        with tracing.step_span(name, "step"):
            with self._bounded(name):
                result = self._call(fn)
            return self._record(name, "step", result, started)

    def atomic_step(
        self, name: str, fn: Callable[..., Any], *, using: str | None = None
    ) -> Any:
        """Run ``fn`` and record its result in ONE transaction on the jobs database (S9)."""
        stored = self.enter(check_name(name), "atomic")
        if stored is not None:
            return stored.output
        alias = using or DEFAULT_DB_ALIAS
        if alias != self.alias:
            raise InvalidArgument(
                "using",
                alias,
                f"atomic_step commits fn's writes with its checkpoint in one transaction "
                f"on the jobs database {self.alias!r}; fn must write there "
                "(use run.step, at least once, for another database)",
                job=self.definition.name,
            )
        self.refuse_to_start(name)
        started = time.monotonic()
        with (
            tracing.step_span(name, "atomic"),
            self._bounded(name),
            transaction.atomic(using=self.alias),
        ):
            result = self._call(fn)
            return self._record(name, "atomic", result, started, db=self.atomic_db)

    # -- run.sleep -------------------------------------------------------------------

    # -- run.sleep / run.wait_for_event (parking.py) ---------------------------------

    def sleep(
        self, name_or_duration: str | Duration, duration: Duration | None
    ) -> None:
        """Suspend the run until the clock passes the sleep's wake time (S3)."""
        parking.sleep(self, name_or_duration, duration)

    def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Mapping[str, Any] | None = None,
        timeout: Duration | None = None,
        timeout_ok: bool = False,
    ) -> Any:
        """Answer the payload of the first matching publication, suspending until one
        comes (S4); at the timeout raise EventTimeout, or answer None with timeout_ok."""
        return parking.wait_for_event(
            self, name, event, match=match, timeout=timeout, timeout_ok=timeout_ok
        )

    # -- run.spawn / run.wait_for_jobs (workflows.py) -------------------------------

    def spawn(self, name: str, handle: object, input: dict[str, Any]) -> Any:
        """Enqueue a child job as the step ``name``, with its checkpoint (S10)."""
        return workflows.spawn(self, check_name(name), handle, input)

    def spawn_many(self, name: str, handle: object, inputs: object) -> Any:
        """Enqueue one child per input, every child and checkpoint at once (S10)."""
        return workflows.spawn_many(self, check_name(name), handle, inputs)

    def wait_for_jobs(
        self, name: str, children: object, timeout: Duration | None = None
    ) -> Any:
        """Suspend until every child has settled; answer their outcomes (S11)."""
        return workflows.wait_for_jobs(self, check_name(name), children, timeout)

    # -- run.reschedule / run.progress -----------------------------------------------

    def reschedule(
        self,
        *,
        delay: Duration | None = None,
        run_at: Any = None,
        input: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the intent to run the job again as a new stage (S5)."""
        self.rescheduled = reschedule_intent(
            self.definition,
            self.job["input"],
            delay=delay,
            run_at=run_at,
            input=input,
        )

    def _write_progress(self, value: str) -> None:
        if not self.db.run(
            QUERIES["job_progress"],
            id=self.job["id"],
            lease_owner=self.job["lease_owner"],
            progress=value,
        ):
            raise LeaseLost(
                f"{self.definition.name}: progress refused, the claim is lost"
            )

    # -- the guards ------------------------------------------------------------------

    def enter(self, name: str, kind: str) -> Stored | None:
        """Check the name once per attempt (S2) and answer what storage holds for it."""
        if self.suspension is not None:
            raise self.suspension  # the body swallowed its suspension: park it again
        if name in self._seen:
            raise StepDuplicate(self.definition.name, name)
        self._seen.add(name)
        stored = self._load().get(name)
        if stored is not None and stored.kind != kind:
            raise InvalidArgument(
                "name",
                name,
                f"recorded as a {stored.kind} step, now asked as a {kind} step: "
                "step names must be deterministic",
                job=self.definition.name,
            )
        return stored

    def refuse_to_start(self, name: str) -> None:
        if self.token.is_set():
            raise JobAborted(f"{self.token.reason}, before step {name!r}")

    def refuse_to_record(self, name: str) -> None:
        # A drain leaves the row this worker's: a finished step is still worth keeping.
        if self.token.is_set() and self.token.reason != DRAINING:
            raise JobAborted(f"{self.token.reason}, step {name!r} not recorded")

    def refuse_to_park(self, name: str) -> None:
        # Parking frees the worker, which is what a drain wants: a sleep or a wait
        # reached during a drain suspends the run rather than interrupting it.
        if self.token.is_set() and self.token.reason != DRAINING:
            raise JobAborted(f"{self.token.reason}, {name!r} not parked")

    def suspend(self, suspension: RunSuspended) -> NoReturn:
        self.suspension = suspension
        raise suspension

    # -- storage ---------------------------------------------------------------------

    def _load(self) -> dict[str, Stored]:
        if self._stored is None:
            rows = self.db.run(QUERIES["step_list"], job_id=self.job["id"])
            self._stored = {
                r["name"]: Stored(
                    r["kind"], r["status"], decode(r["output"]), r["wake_at"]
                )
                for r in rows
            }
        return self._stored

    def remember(
        self, name: str, kind: str, status: str, output: Any, wake_at: Any
    ) -> None:
        self._load()[name] = Stored(kind, status, output, wake_at)

    def claim(self) -> dict[str, Any]:
        return {"job_id": self.job["id"], "lease_owner": self.job["lease_owner"]}

    def write(
        self, query: str, *, db: Database | None = None, **params: Any
    ) -> list[Row]:
        """A fenced step write; no row answered means the claim is lost."""
        statement = QUERIES[query]
        given = {
            **self.claim(),
            "attempt": self.job["attempt"],
            "now": self.now(),
            **params,
        }
        rows = (db or self.db).run(
            statement, **{k: v for k, v in given.items() if k in statement.params}
        )
        if not rows:
            if self.token.is_set():
                raise JobAborted(f"{self.token.reason}, {query} refused")
            raise LeaseLost(
                f"{self.definition.name}: {query} refused, the claim is no longer "
                "this worker's"
            )
        return rows

    def _call(self, fn: Callable[..., Any]) -> Any:
        if not callable(fn):
            raise InvalidArgument(
                "fn", fn, "a function (of no argument, or of the cancel token)"
            )
        result = fn(self.token) if _takes_token(fn) else fn()
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise InvalidArgument(
                "fn",
                fn,
                "a step function is synchronous (wrap async code in async_to_sync)",
                job=self.definition.name,
            )
        return result

    def _record(
        self,
        name: str,
        kind: str,
        result: Any,
        started: float,
        db: Database | None = None,
    ) -> Any:
        encoded = encode_output(self.definition.name, name, result)
        self.refuse_to_record(name)
        rows = self.write(
            "step_record",
            db=db,
            name=name,
            kind=kind,
            output=encoded,
            duration=time.monotonic() - started,
        )
        output = decode(rows[0]["output"])
        self.remember(name, kind, "done", output, None)
        return output
