"""Run one claimed job: decode, call the body, map how it ended to exactly one outcome (W9),
and write that outcome with a statement fenced on the claim (W3).

The worker and the testing helpers both come through here, so a test drains the queue
through the same code and the same SQL a worker uses.

A body that parks (``RunSuspended`` from run.sleep / run.wait_for_event) is suspended;
one that called run.reschedule and returned starts its next stage; deadlines (S6) fail
the attempt through ``Deadlines`` (deadlines.py), at the deadline itself when the worker
gives a ``deadline_settler``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.db import close_old_connections

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.redaction import cached_redaction
from ultimate_jobs.declaration.registry import Declared, Registry, registry
from ultimate_jobs.declaration.run import TIMEOUT, CancelToken, Run
from ultimate_jobs.durable.deadlines import ATTEMPT
from ultimate_jobs.ground.context import enter_attempt, leave_attempt
from ultimate_jobs.ground.exceptions import (
    InputVersionAhead,
    RunSuspended,
    UnknownJob,
)
from ultimate_jobs.ground.signals import job_started
from ultimate_jobs.observability import runlogs, tracing
from ultimate_jobs.runtime import overtime
from ultimate_jobs.runtime.attempt import Ending, open_attempt
from ultimate_jobs.runtime.finish import Finisher
from ultimate_jobs.runtime.orm_use import connected_here
from ultimate_jobs.runtime.outcomes import Attempt, Outcome, job_fields
from ultimate_jobs.runtime.results import keep_result
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql.rows import ClaimedJob

if TYPE_CHECKING:
    from ultimate_jobs.runtime.acks import Acks

logger = logging.getLogger(__name__)


class Executor:
    """Runs claimed rows, one at a time. One per thread: it owns a settler."""

    def __init__(
        self,
        settler: Settler,
        *,
        jobs: Registry = registry,
        manage_connections: bool = False,
        body_context: Callable[
            [], AbstractContextManager[Any]
        ] = contextlib.nullcontext,
        deadline_settler: Callable[[], Settler] | None = None,
        acks: Acks | None = None,
        reraise: tuple[type[BaseException], ...] = (),
        alias: str | None = None,
        settings: JobsSettings | None = None,
    ) -> None:
        self.settler = settler
        self.jobs = jobs
        self.manage_connections = manage_connections
        self.body_context = body_context  # the testing helpers use a savepoint
        # S6: a settler of its own (its own connection) for failing an attempt at its
        # deadline while the body still runs; without one (the testing runner) the
        # attempt is failed when the body returns.
        self.deadline_settler = deadline_settler
        # W9: whatever a body raises ends its attempt, SystemExit and
        # KeyboardInterrupt included (a body's exit() must never take its handler
        # thread down). The testing runner passes (KeyboardInterrupt,): it runs bodies
        # in the test's main thread, where a real Ctrl-C lands and must stop the run.
        self.reraise = reraise
        # Read once here, never per job (N2).
        self.settings = settings or get_settings()
        # Q1: the alias of the jobs this executor runs (their atomic steps' journal).
        self.alias = alias or self.settings.DATABASE
        # N3: acks is the worker's batching writer of completions.
        self.finish = Finisher(
            settler, jobs=jobs, acks=acks, redact=self.settings.REDACT
        )

    def _call(self, handle: Declared, run: Run, kwargs: dict[str, Any]) -> Any:
        func = handle.definition.func
        if self.body_context is contextlib.nullcontext:  # a worker's: no wrapper (N2)
            if handle.definition.is_async:
                return async_to_sync(func)(run, **kwargs)
            return func(run, **kwargs)
        with self.body_context():
            if handle.definition.is_async:
                # async_to_sync, not a bare event loop: the body's sync_to_async calls
                # (the ORM) then run in this thread, on this thread's connection.
                return async_to_sync(func)(run, **kwargs)
            return func(run, **kwargs)

    def execute(
        self,
        job: ClaimedJob,
        token: CancelToken | None = None,
        *,
        before_settle: Callable[[], None] | None = None,
        on_overrun: Callable[[], None] | None = None,
    ) -> Attempt:
        """Run one claimed row to exactly one outcome and write it.

        ``before_settle`` is called just before the outcome is written (the worker marks
        the job as settling, so its heartbeat stops renewing and reporting it).
        ``on_overrun`` is called when the attempt was failed at its deadline while the
        body runs on, ignoring its token: the body holds its thread until it returns
        (the worker reports that lost capacity). With OpenTelemetry, the attempt runs in
        a span, a child of the enqueuing one (M2).
        """
        with tracing.attempt_span(job) as span:
            self.settler.before_write = before_settle
            started = time.monotonic()
            token = token or CancelToken()
            # Django's old connections closed around the body, as around a request;
            # a thread that never connected through Django has none (orm_use.py).
            if self.manage_connections and connected_here():
                close_old_connections()
            try:
                attempt = self._execute(
                    job, token, span, started, before_settle, on_overrun
                )
            finally:
                if self.manage_connections and connected_here():
                    close_old_connections()
            span.settled(attempt)
            return attempt

    def _execute(
        self,
        job: ClaimedJob,
        token: CancelToken,
        span: tracing.AttemptSpan,
        started: float,
        before_settle: Callable[[], None] | None,
        on_overrun: Callable[[], None] | None,
    ) -> Attempt:
        name = job["name"]
        try:
            handle = self.jobs.get(name)
        except UnknownJob as exc:
            return self.finish.failed(job, None, None, exc, token, started)
        definition = handle.definition
        redaction = cached_redaction(definition.redact, self.settings.REDACT)
        try:
            kwargs = payload.decode(
                name,
                definition.signature,
                job["input"],
                max_depth=self.settings.MAX_INPUT_DEPTH,
                redaction=redaction,
                version=definition.version,
                upgrade=definition.upgrade,
            )
        except InputVersionAhead as exc:  # P11: for a worker of the newer code
            return self.finish.hand_back(job, exc, token, started)
        except Exception as exc:  # InvalidJobPayload: terminal on this attempt (J1)
            return self.finish.failed(job, handle, None, exc, token, started)
        ending = open_attempt(
            job,
            handle,
            kwargs,
            token,
            started,
            db=self.settler.db,
            alias=self.alias,
            now=self.settler.now,
            redaction=redaction,
            log_capacity=self.settings.RUN_LOG_MAX_ENTRIES,
            watched=self.deadline_settler is not None,
        )
        run = ending.run
        scopes = enter_attempt(
            name, run.tenant_id, span.correlation_id(run.correlation_id)
        )
        try:
            # N2: an empty receiver list is read before the call (send() would answer
            # [] for it, but its call with keywords costs ~0.15 µs); has_listeners()
            # would cost more (1.6 µs), so it is not asked.
            if job_started.receivers:
                job_started.send(sender=handle, run=run)
            if logger.isEnabledFor(logging.DEBUG):  # one line per job: N2
                logger.debug("jobs.attempt.started", extra=job_fields(job))
            self._run_body(ending, before_settle, on_overrun)
            # The attempt's log lines, in one statement before its outcome, so a
            # job seen settled shows them; a body that logged nothing writes nothing.
            buffer = run.log_buffer
            if buffer is not None and buffer.holds():
                runlogs.write(
                    self.settler.db,
                    job_id=job["id"],
                    run_id=job["run_id"],
                    attempt=job["attempt"],
                    buffer=buffer,
                    now=self.settler.now(),
                )
            return self._settle(ending)
        finally:
            leave_attempt(scopes)

    def _run_body(
        self,
        ending: Ending,
        before_settle: Callable[[], None] | None,
        on_overrun: Callable[[], None] | None,
    ) -> None:
        """Call the body under its attempt deadline (S6) and note how it ended."""
        definition, deadlines = ending.handle.definition, ending.deadlines
        timer = None
        if deadlines is not None:
            if self.deadline_settler is not None:
                deadlines.on_expiry = lambda what: overtime.settle_at_deadline(
                    ending,
                    self.finish,
                    self.deadline_settler,
                    before_settle,
                    on_overrun,
                )
            if definition.timeout is not None:
                timer = deadlines.arm(definition.timeout, ATTEMPT)
        try:
            ending.result = self._call(ending.handle, ending.run, ending.kwargs)
            if definition.store_result:  # P8: only jobs that opt in
                keep_result(self.settler.db, ending.job, definition.name, ending.result)
        except RunSuspended as suspension:
            ending.suspension = suspension
        except BaseException as exc:
            if isinstance(exc, self.reraise):
                raise
            # Any crash records its real error (B4, W9): a RecursionError, a
            # MemoryError, even a body's sys.exit(); never a lapsed lease.
            ending.error = exc
        finally:
            if ending.body_ended is not None:
                ending.body_ended.set()
            if timer is not None:
                timer.cancel()

    def crashed(
        self, job: ClaimedJob, token: CancelToken, error: BaseException, started: float
    ) -> Attempt:
        """Record an attempt whose running broke outside the body (a signal receiver,
        a decode, a write that raised): its real error settles the row now, so it never
        waits out its lease to end as LEASE_LAPSED_FINAL_ATTEMPT (B4)."""
        handle = self.jobs.get(job["name"]) if job["name"] in self.jobs else None
        return self.finish.failed(job, handle, None, error, token, started)

    def _settle(self, ending: Ending) -> Attempt:
        """Write the one outcome of the attempt (W9), unless its deadline did."""
        job, journal, token = ending.job, ending.journal, ending.token
        deadlines = ending.deadlines
        if deadlines is not None and not deadlines.settle_once():
            # The deadline failed the attempt while the body ran on (S6).
            deadlines.settled_by_deadline.wait()
            if ending.returned:
                overtime.abandoned(ending)
            return deadlines.outcome or ending.unsettled()
        if journal is not None:
            if journal.suspension is not None and ending.suspension is None:
                # The body caught its own RunSuspended: the run suspends all the same.
                logger.warning(
                    "jobs.suspension.swallowed",
                    extra={**job_fields(job), "step": journal.suspension.step},
                )
                ending.suspension = journal.suspension
        progress = ending.progress()
        finish = self.finish
        if token.is_set() and token.reason == TIMEOUT:
            if ending.returned:
                overtime.abandoned(ending)
            error = overtime.timeout_error(ending)
            return finish.failed(
                job,
                ending.handle,
                ending.kwargs,
                error,
                token,
                ending.started,
                progress=progress,
            )
        if ending.suspension is not None:
            row = self.settler.suspend(job, ending.suspension, progress)
            return finish.report(
                job,
                Outcome.SUSPENDED,
                row is not None,
                ending.started,
                token,
                run_at=row["run_at"] if row else None,
                due_in=row["due_in"] if row else None,
            )
        if ending.error is not None:
            return finish.failed(
                job,
                ending.handle,
                ending.kwargs,
                ending.error,
                token,
                ending.started,
                progress=progress,
            )
        if journal is not None and journal.rescheduled is not None:
            row = self.settler.reschedule(job, journal.rescheduled, progress)
            return finish.report(
                job,
                Outcome.RESCHEDULED,
                row is not None,
                ending.started,
                token,
                run_at=row["run_at"] if row else None,
                due_in=row["due_in"] if row else None,
            )
        return finish.completed(
            job,
            ending.handle,
            ending.kwargs,
            ending.result,
            token,
            ending.started,
            progress=progress,
        )
