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
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.db import close_old_connections

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration import payload
from ultimate_jobs.declaration.decision import decide
from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.declaration.redaction import (
    LazySecrets,
    cached_redaction,
    scrub_text,
)
from ultimate_jobs.declaration.registry import Declared, Registry, registry
from ultimate_jobs.declaration.run import (
    CANCELLED,
    DRAINING,
    LEASE_LOST,
    TIMEOUT,
    CancelToken,
    Run,
)
from ultimate_jobs.declaration.runlog import RunLogBuffer
from ultimate_jobs.durable.deadlines import ATTEMPT, Deadlines
from ultimate_jobs.durable.steps import Journal
from ultimate_jobs.ground.context import (
    correlation_scope,
    job_scope,
    tenant_scope,
)
from ultimate_jobs.ground.exceptions import (
    InputVersionAhead,
    JobTimeout,
    RunSuspended,
    UnknownJob,
)
from ultimate_jobs.ground.signals import job_attempt_failed, job_settled, job_started
from ultimate_jobs.observability import metrics, runlogs, tracing
from ultimate_jobs.runtime.outcomes import (
    FAILED_OUTCOMES,
    Attempt,
    Outcome,
    announce,
    job_fields,
)
from ultimate_jobs.runtime.results import keep_result
from ultimate_jobs.runtime.settle import Settler, error_code, format_error
from ultimate_jobs.sql.rows import ClaimedJob

if TYPE_CHECKING:
    from ultimate_jobs.runtime.acks import Acks

logger = logging.getLogger(__name__)
# How long a body may take to stop after its deadline set its token before it counts
# as one that ignores it (a body that looks at its token every step stops within it).
OVERRUN_GRACE = 1.0
# P11: how long a row whose input is newer than this code waits before it is due again
# (a worker of the newer code claims it meanwhile; an older one hands it back again).
HAND_BACK_DELAY = 30.0


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
    ) -> None:
        self.settler = settler
        self.jobs = jobs
        self.manage_connections = manage_connections
        self.body_context = body_context  # the testing helpers use a savepoint
        # S6: a settler of its own (its own connection) for failing an attempt at its
        # deadline while the body still runs; without one (the testing runner) the
        # attempt is failed when the body returns.
        self.deadline_settler = deadline_settler
        # N3: the worker's batching writer of completions (None: write each at once).
        self.acks = acks
        # W9: whatever a body raises ends its attempt, SystemExit and
        # KeyboardInterrupt included (a body's exit() must never take its handler
        # thread down). The testing runner passes (KeyboardInterrupt,): it runs bodies
        # in the test's main thread, where a real Ctrl-C lands and must stop the run.
        self.reraise = reraise
        # Q1: the alias of the jobs this executor runs (their atomic steps' journal).
        self.alias = alias or get_settings().DATABASE
        self.log_capacity = get_settings().RUN_LOG_MAX_ENTRIES

    def _call(self, handle: Declared, run: Run, kwargs: dict[str, Any]) -> Any:
        func = handle.definition.func
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
            attempt = self._execute(
                job, token, span, before_settle=before_settle, on_overrun=on_overrun
            )
            span.settled(attempt)
            return attempt

    def _execute(
        self,
        job: ClaimedJob,
        token: CancelToken | None,
        span: tracing.AttemptSpan,
        *,
        before_settle: Callable[[], None] | None = None,
        on_overrun: Callable[[], None] | None = None,
    ) -> Attempt:
        self.settler.before_write = before_settle
        started = time.monotonic()
        token = token or CancelToken()
        name = job["name"]
        if self.manage_connections:
            close_old_connections()
        try:
            try:
                handle = self.jobs.get(name)
            except UnknownJob as exc:
                return self._failed(job, None, None, exc, token, started)
            definition = handle.definition
            settings = get_settings()
            redaction = cached_redaction(definition.redact, settings.REDACT)
            try:
                kwargs = payload.decode(
                    name,
                    definition.signature,
                    job["input"],
                    max_depth=settings.MAX_INPUT_DEPTH,
                    redaction=redaction,
                    version=definition.version,
                    upgrade=definition.upgrade,
                )
            except InputVersionAhead as exc:  # P11: for a worker of the newer code
                return self._hand_back(job, exc, token, started)
            except Exception as exc:  # InvalidJobPayload: terminal on this attempt (J1)
                return self._failed(job, handle, None, exc, token, started)
            deadlines = Deadlines(token, step_timeout=definition.step_timeout)
            journal = Journal(
                db=self.settler.db,
                atomic_db=DjangoDatabase(self.alias),
                alias=self.alias,
                job=job,
                definition=definition,
                token=token,
                deadlines=deadlines,
                now=self.settler.now,
            )
            run = Run(
                job_id=job["id"],
                run_id=job["run_id"],
                name=name,
                input=kwargs,
                attempt=job["attempt"],
                max_attempts=job["max_attempts"],
                tenant_id=job["tenant_id"],
                enqueued_by=job["enqueued_by"],
                correlation_id=job["correlation_id"],
                queue=job["queue"],
                cancel_token=token,
                journal=journal,
                secrets=LazySecrets(redaction, kwargs),
                log_buffer=RunLogBuffer(self.log_capacity)
                if self.log_capacity
                else None,
            )
            ending = _Ending(job, handle, kwargs, journal, token, started)
            with (
                job_scope(name, run.tenant_id),
                correlation_scope(span.correlation_id(run.correlation_id)),
            ):
                job_started.send(sender=handle, run=run)
                if logger.isEnabledFor(logging.DEBUG):  # one line per job: N2
                    logger.debug("jobs.attempt.started", extra=job_fields(job))
                if self.deadline_settler is not None:
                    deadlines.on_expiry = lambda what: self._settle_at_deadline(
                        ending, before_settle, on_overrun
                    )
                timer = (
                    deadlines.arm(definition.timeout, ATTEMPT)
                    if definition.timeout is not None
                    else None
                )
                try:
                    ending.result = self._call(handle, run, kwargs)
                    if definition.store_result:  # P8: only jobs that opt in
                        keep_result(self.settler.db, job, job["name"], ending.result)
                except RunSuspended as suspension:
                    ending.suspension = suspension
                except BaseException as exc:
                    if isinstance(exc, self.reraise):
                        raise
                    # Any crash records its real error (B4, W9): a RecursionError, a
                    # MemoryError, even a body's sys.exit(); never a lapsed lease.
                    ending.error = exc
                finally:
                    ending.body_ended.set()
                    if timer is not None:
                        timer.cancel()
                # The attempt's log lines, in one statement before its outcome, so a
                # job seen settled shows them.
                runlogs.write(
                    self.settler.db,
                    job_id=job["id"],
                    run_id=job["run_id"],
                    attempt=job["attempt"],
                    buffer=run.log_buffer,
                    now=self.settler.now(),
                )
                return self._settle(ending)
        finally:
            if self.manage_connections:
                close_old_connections()

    def crashed(
        self, job: ClaimedJob, token: CancelToken, error: BaseException, started: float
    ) -> Attempt:
        """Record an attempt whose running broke outside the body (a signal receiver,
        a decode, a write that raised): its real error settles the row now, so it never
        waits out its lease to end as LEASE_LAPSED_FINAL_ATTEMPT (B4)."""
        handle = self.jobs.get(job["name"]) if job["name"] in self.jobs else None
        return self._failed(job, handle, None, error, token, started)

    def _settle(self, ending: _Ending) -> Attempt:
        """Write the one outcome of the attempt (W9), unless its deadline did."""
        job, journal, token = ending.job, ending.journal, ending.token
        deadlines = journal.deadlines
        if not deadlines.settle_once():
            # The deadline failed the attempt while the body ran on (S6).
            deadlines.settled_by_deadline.wait()
            if ending.returned:
                self._abandoned(ending)
            return deadlines.outcome or self._unsettled(ending)
        if journal.suspension is not None and ending.suspension is None:
            # The body caught its own RunSuspended: the run suspends all the same.
            logger.warning(
                "jobs.suspension.swallowed",
                extra={**job_fields(job), "step": journal.suspension.step},
            )
            ending.suspension = journal.suspension
        progress = journal.progress.unsaved()
        if token.is_set() and token.reason == TIMEOUT:
            if ending.returned:
                self._abandoned(ending)
            return self._failed(
                job,
                ending.handle,
                ending.kwargs,
                self._timeout_error(ending),
                token,
                ending.started,
                progress=progress,
            )
        if ending.suspension is not None:
            row = self.settler.suspend(job, ending.suspension, progress)
            return self._report(
                job,
                Outcome.SUSPENDED,
                row is not None,
                ending.started,
                token,
                run_at=row["run_at"] if row else None,
                due_in=row["due_in"] if row else None,
            )
        if ending.error is not None:
            return self._failed(
                job,
                ending.handle,
                ending.kwargs,
                ending.error,
                token,
                ending.started,
                progress=progress,
            )
        if journal.rescheduled is not None:
            row = self.settler.reschedule(job, journal.rescheduled, progress)
            return self._report(
                job,
                Outcome.RESCHEDULED,
                row is not None,
                ending.started,
                token,
                run_at=row["run_at"] if row else None,
                due_in=row["due_in"] if row else None,
            )
        if token.is_set() and token.reason == DRAINING:
            # The body returned although its worker asked it to stop: a body that
            # returns on its token is marked done, mid-work or not (issue 30).
            logger.warning(
                "jobs.attempt.returned-while-draining",
                extra={
                    **job_fields(job),
                    "outcome": "completed",
                    "hint": "raise (run.cancel_token.raise_if_cancelled()) to hand the "
                    "job back to the queue instead",
                },
            )
        return self._completed(
            job,
            ending.handle,
            ending.kwargs,
            ending.result,
            token,
            ending.started,
            progress=progress,
        )

    def _settle_at_deadline(
        self,
        ending: _Ending,
        before_settle: Callable[[], None] | None,
        on_overrun: Callable[[], None] | None = None,
    ) -> None:
        """S6, in a worker: fail the attempt now; the body may go on, fenced out."""
        deadlines = ending.journal.deadlines
        if self.deadline_settler is None or not deadlines.settle_once():
            return
        settler = self.deadline_settler()
        settler.before_write = before_settle
        try:
            with tenant_scope(ending.job["tenant_id"]):
                deadlines.outcome = self._failed(
                    ending.job,
                    ending.handle,
                    ending.kwargs,
                    self._timeout_error(ending),
                    ending.token,
                    ending.started,
                    settler=settler,
                    progress=ending.journal.progress.unsaved(),
                )
        except Exception:
            logger.exception("jobs.timeout.settle-failed", extra=job_fields(ending.job))
        finally:
            close = getattr(settler.db, "close", None)
            if close is not None:
                close()
            deadlines.settled_by_deadline.set()
        # The attempt is settled; the body was told to stop. One that is still running
        # after the grace ignores its token and holds its thread (lost capacity).
        if not ending.body_ended.wait(OVERRUN_GRACE):
            self._overrun(ending, on_overrun)

    def _timeout_error(self, ending: _Ending) -> JobTimeout:
        definition: JobDefinition = ending.handle.definition
        what = ending.journal.deadlines.expired or ATTEMPT
        if what == ATTEMPT:
            message = f"the attempt ran past its timeout ({definition.timeout or 0:g}s)"
        else:
            message = (
                f"{what} ran past its step_timeout ({definition.step_timeout or 0:g}s)"
            )
        error = JobTimeout(f"{definition.name}: {message}")
        error.__cause__ = ending.error
        return error

    def _overrun(self, ending: _Ending, on_overrun: Callable[[], None] | None) -> None:
        """S6: the deadline passed with the body still running. Nothing can stop a
        thread: it stays busy until the body looks at its token or returns. Logged,
        counted (``ultimate_jobs_bodies_abandoned_total``) and reported (the worker's
        registry row and readiness) as lost capacity."""
        logger.error(
            "jobs.timeout.overrun",
            extra={
                **job_fields(ending.job),
                "deadline": ending.journal.deadlines.expired,
                "ran_for": round(time.monotonic() - ending.started, 3),
            },
        )
        metrics.body_abandoned(ending.job["queue"], ending.job["name"], jobs=self.jobs)
        if on_overrun is not None:
            on_overrun()

    def _abandoned(self, ending: _Ending) -> None:
        """S6: the body ignored its cancelled token and finished anyway."""
        logger.error(
            "jobs.timeout.abandoned",
            extra={
                **job_fields(ending.job),
                "deadline": ending.journal.deadlines.expired,
                "ran_for": round(time.monotonic() - ending.started, 3),
            },
        )

    def _unsettled(self, ending: _Ending) -> Attempt:
        return Attempt(
            ending.job["id"],
            ending.job["name"],
            Outcome.RETRIED,
            landed=False,
            duration=time.monotonic() - ending.started,
            error=ending.error,
        )

    def _completed(
        self,
        job: ClaimedJob,
        handle: Declared,
        kwargs: dict[str, Any],
        result: Any,
        token: CancelToken,
        started: float,
        progress: str | None = None,
    ) -> Attempt:
        duration = time.monotonic() - started
        if self.acks is not None and not _heard(handle, job):
            # N3: nobody waits on this ending; the completion joins the next batch and
            # is reported once it is written.
            self.settler.before()
            batched = self.acks.add(
                job,
                progress,
                lambda landed: self._report(
                    job, Outcome.COMPLETED, landed, started, token, duration=duration
                ),
            )
        else:
            batched = False
        if batched:
            # Reported as landed: whether it did is logged and counted when written.
            return Attempt(
                job["id"],
                job["name"],
                Outcome.COMPLETED,
                landed=True,
                duration=duration,
            )
        landed = self.settler.complete(job, progress)
        attempt = self._report(job, Outcome.COMPLETED, landed, started, token)
        if landed:
            announce(handle, job, kwargs, Outcome.COMPLETED, result=result)
        return attempt

    def _failed(
        self,
        job: ClaimedJob,
        handle: Declared | None,
        kwargs: dict[str, Any] | None,
        exc: BaseException,
        token: CancelToken,
        started: float,
        *,
        settler: Settler | None = None,
        progress: str | None = None,
    ) -> Attempt:
        settler = settler or self.settler
        secrets = _secrets(handle, kwargs)
        if token.is_set() and token.reason == DRAINING:
            # W6: the body stopped because of the drain; the attempt is not counted.
            landed = settler.release(job, uncount=True)
            return self._report(
                job, Outcome.INTERRUPTED, landed, started, token, exc, secrets=secrets
            )
        if token.is_set() and token.reason in (LEASE_LOST, CANCELLED):
            # The row is no longer ours: any write would be fenced out; say so and stop.
            logger.warning(
                "jobs.settle.unowned", extra={**job_fields(job), "reason": token.reason}
            )
            duration = time.monotonic() - started
            metrics.attempt_finished(job, metrics.UNOWNED, duration, jobs=self.jobs)
            return Attempt(
                job["id"],
                job["name"],
                Outcome.RETRIED,
                landed=False,
                duration=duration,
                error=exc,
            )
        verdict = decide(job, exc, handle.definition if handle is not None else None)
        last_error = scrub_text(format_error(exc), secrets)
        if verdict.stop_reason is not None:
            outcome = FAILED_OUTCOMES[verdict.state]
            landed = settler.bury(
                job,
                state=verdict.state,
                error=exc,
                stop_reason=verdict.stop_reason,
                progress=progress,
                last_error=last_error,
            )
            attempt = self._report(
                job,
                outcome,
                landed,
                started,
                token,
                exc,
                stop=verdict.stop_reason,
                secrets=secrets,
            )
            if landed and handle is not None:
                announce(handle, job, kwargs, outcome, error=exc)
            return attempt
        delay = verdict.delay or 0.0
        run_at = settler.retry(job, delay, exc, progress, last_error=last_error)
        return self._report(
            job,
            Outcome.RETRIED,
            run_at is not None,
            started,
            token,
            exc,
            run_at=run_at,
            due_in=delay,
            secrets=secrets,
        )

    def _hand_back(
        self,
        job: ClaimedJob,
        exc: InputVersionAhead,
        token: CancelToken,
        started: float,
    ) -> Attempt:
        """P11: the input is newer than this code; the row goes back untouched (its
        attempt not counted, no error kept) and is due again after HAND_BACK_DELAY,
        as a row of a job name this worker does not declare is never claimed."""
        landed = self.settler.hand_back(job, HAND_BACK_DELAY)
        logger.warning(
            "jobs.attempt.version-ahead",
            extra={
                **job_fields(job),
                "version": exc.version,
                "declared": exc.declared,
                "delay": HAND_BACK_DELAY,
            },
        )
        return self._report(job, Outcome.INTERRUPTED, landed, started, token)

    def _report(
        self,
        job: ClaimedJob,
        outcome: Outcome,
        landed: bool,  # noqa: FBT001 - internal helper, always called with a computed value
        started: float,
        token: CancelToken,
        error: BaseException | None = None,
        *,
        stop: str | None = None,
        run_at: Any = None,
        due_in: float | None = None,
        duration: float | None = None,
        secrets: tuple[str, ...] = (),
    ) -> Attempt:
        if duration is None:
            duration = time.monotonic() - started
        counted = str(outcome) if landed else metrics.UNOWNED
        metrics.attempt_finished(job, counted, duration, jobs=self.jobs)
        if landed and error is None and outcome is Outcome.COMPLETED:
            # A success is a DEBUG line (N2): at thousands of jobs a second an INFO
            # line each cost a tenth of the worker's time. Failures, retries, deaths
            # and every other ending stay at INFO and above.
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "jobs.attempt.settled",
                    extra={
                        **job_fields(job),
                        "outcome": str(outcome),
                        "duration": round(duration, 6),
                    },
                )
            return Attempt(
                job["id"], job["name"], outcome, landed, duration, None, run_at, due_in
            )
        fields = {
            **job_fields(job),
            "outcome": str(outcome),
            "duration": round(duration, 6),
        }
        if error is not None:
            fields["error"] = scrub_text(f"{type(error).__name__}: {error}", secrets)[
                :500
            ]
            fields["error_code"] = error_code(error)
        if stop is not None:
            fields["stop"] = stop
        if landed and error is not None and outcome in _FAILED:
            self._attempt_failed(job, outcome, error)
        if not landed:
            logger.warning("jobs.settle.unowned", extra=fields)
        elif error is not None and outcome in (Outcome.DEAD_LETTERED, Outcome.DROPPED):
            logger.error("jobs.attempt.failed", extra=fields)
        elif error is not None and outcome is Outcome.RETRIED:
            logger.warning("jobs.attempt.failed", extra=fields)
        else:
            logger.info("jobs.attempt.settled", extra=fields)
        return Attempt(
            job["id"], job["name"], outcome, landed, duration, error, run_at, due_in
        )

    def _attempt_failed(
        self, job: ClaimedJob, outcome: Outcome, error: BaseException
    ) -> None:
        """P4: ``job_attempt_failed`` once per attempt that raised and was settled
        retried, dead-lettered or dropped; a receiver that raises is logged, never
        the attempt's concern."""
        sender = self.jobs.get(job["name"]) if job["name"] in self.jobs else None
        for _receiver, answer in job_attempt_failed.send_robust(
            sender=sender,
            job_id=job["id"],
            name=job["name"],
            attempt=job["attempt"],
            outcome=outcome,
            error=error,
        ):
            if isinstance(answer, Exception):
                logger.error(
                    "jobs.signal.failed",
                    extra={**job_fields(job), "signal": "job_attempt_failed"},
                    exc_info=answer,
                )


_FAILED = (Outcome.RETRIED, Outcome.DEAD_LETTERED, Outcome.DROPPED)


@dataclass(eq=False)
class _Ending:
    """How one body ended: returned a result, raised, or suspended."""

    job: ClaimedJob
    handle: Declared
    kwargs: dict[str, Any]
    journal: Journal
    token: CancelToken
    started: float
    result: Any = None
    error: BaseException | None = None
    suspension: RunSuspended | None = None
    body_ended: threading.Event = field(default_factory=threading.Event)

    @property
    def returned(self) -> bool:
        return self.error is None and self.suspension is None


def _secrets(handle: Declared | None, kwargs: dict[str, Any] | None) -> tuple[str, ...]:
    """The input's redacted values, kept out of the stored error and the logs (B5)."""
    if handle is None or kwargs is None:
        return ()
    redaction = cached_redaction(handle.definition.redact, get_settings().REDACT)
    return tuple(redaction.secrets(kwargs))


def _heard(handle: Declared, job: ClaimedJob) -> bool:
    """Whether somebody must hear of this ending right after the row settles: an
    on_settled hook, job_settled receivers, or a concurrency slot to free."""
    return (
        handle.definition.on_settled is not None
        or job_settled.has_listeners(sender=handle)
        or job.get("lease_key") is not None
    )
