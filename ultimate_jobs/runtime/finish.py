"""Write the one outcome of an attempt (W9) and report it: completed (batched with the
worker's acks when nobody waits on it, N3), failed through the one failure decision
(``decide``: retried, dead-lettered or dropped), interrupted by a drain (W6), handed back
to a newer worker (P11); then the metric, the log line and ``job_attempt_failed`` (P4).

The executor (executor.py) runs the body and says how it ended; this writes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, cast

from ultimate_jobs.declaration.decision import decide
from ultimate_jobs.declaration.redaction import cached_redaction, scrub_text
from ultimate_jobs.declaration.registry import Declared, Registry
from ultimate_jobs.declaration.run import CANCELLED, DRAINING, LEASE_LOST, CancelToken
from ultimate_jobs.ground.exceptions import InputVersionAhead
from ultimate_jobs.ground.signals import job_attempt_failed, job_settled
from ultimate_jobs.observability import metrics
from ultimate_jobs.runtime.outcomes import (
    FAILED_OUTCOMES,
    Attempt,
    Outcome,
    announce,
    completed_attempt,
    job_fields,
)
from ultimate_jobs.runtime.settle import Settler, error_code, format_error
from ultimate_jobs.sql.rows import ClaimedJob

if TYPE_CHECKING:
    from ultimate_jobs.runtime.acks import Acks, Pending

logger = logging.getLogger(__name__)
# P11: how long a row whose input is newer than this code waits before it is due again
# (a worker of the newer code claims it meanwhile; an older one hands it back again).
HAND_BACK_DELAY = 30.0
_FAILED = (Outcome.RETRIED, Outcome.DEAD_LETTERED, Outcome.DROPPED)


class Finisher:
    """Writes and reports attempts' outcomes for one executor (one thread)."""

    def __init__(
        self,
        settler: Settler,
        *,
        jobs: Registry,
        acks: Acks | None,
        redact: tuple[str, ...],
    ) -> None:
        self.settler = settler
        self.jobs = jobs
        # N3: the worker's batching writer of completions (None: write each at once).
        self.acks = acks
        self.redact = redact  # the REDACT setting's patterns (B5)

    def completed(
        self,
        job: ClaimedJob,
        handle: Declared,
        kwargs: dict[str, Any],
        result: Any,
        token: CancelToken,
        started: float,
        progress: str | None = None,
    ) -> Attempt:
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
        duration = time.monotonic() - started
        if self.acks is not None and not _heard(handle, job):
            # N3: nobody waits on this ending; the completion joins the next batch and
            # is reported with it once written (``completions``).
            self.settler.before()
            batched = self.acks.add(job, progress, finisher=self, duration=duration)
        else:
            batched = False
        if batched:
            # Reported as landed: whether it did is logged and counted when written.
            return completed_attempt(job["id"], job["name"], duration)
        landed = self.settler.complete(job, progress)
        attempt = self.report(job, Outcome.COMPLETED, landed, started, token)
        if landed:
            announce(handle, job, kwargs, Outcome.COMPLETED, result=result)
        return attempt

    def failed(
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
        secrets = self._secrets(handle, kwargs)
        if token.is_set() and token.reason == DRAINING:
            # W6: the body stopped because of the drain; the attempt is not counted.
            landed = settler.release(job, uncount=True)
            return self.report(
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
        if not verdict.counted:  # issue 31: the server refused the body a connection
            delay = verdict.delay or 0.0
            return self.refused(job, exc, token, started, delay, settler, secrets)
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
            attempt = self.report(
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
        return self.report(
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

    def hand_back(
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
        return self.report(job, Outcome.INTERRUPTED, landed, started, token)

    def refused(
        self,
        job: ClaimedJob,
        exc: BaseException,
        token: CancelToken,
        started: float,
        delay: float,
        settler: Settler,
        secrets: tuple[str, ...],
    ) -> Attempt:
        """Issue 31: the body failed because the server refused a NEW connection
        (max_connections): not the job's failure. The row goes back with its attempt
        not counted (as an interrupted one, W6/W9) and is due after ``delay``, the
        job's backoff: it never dead-letters for it."""
        landed = settler.hand_back(job, delay)
        logger.warning(
            "jobs.attempt.connection-refused",
            extra={
                **job_fields(job),
                "error": scrub_text(f"{type(exc).__name__}: {exc}", secrets)[:500],
                "delay": round(delay, 3),
            },
        )
        return self.report(
            job, Outcome.INTERRUPTED, landed, started, token, due_in=delay
        )

    def completions(self, batch: Sequence[Pending], landed: Collection[Any]) -> None:
        """Report a batch of completions the acks wrote (N3), ``landed`` the ids whose
        fenced write landed: the metrics move once per queue and job name (N2), each
        landed job's DEBUG line only when DEBUG is on, and a completion fenced out is
        reported as ``report`` reports it (W3)."""
        durations: dict[tuple[str, str], list[float]] = {}
        debug = logger.isEnabledFor(logging.DEBUG)
        for pending in batch:
            job = cast("ClaimedJob", pending.job)
            if job["id"] not in landed:
                self.report(
                    job,
                    Outcome.COMPLETED,
                    landed=False,
                    started=0.0,
                    duration=pending.duration,
                )
                continue
            durations.setdefault((job["queue"], job["name"]), []).append(
                pending.duration
            )
            if debug:
                _settled_line(job, pending.duration)
        for (queue, name), spent in durations.items():
            metrics.attempts_finished(queue, name, COMPLETED, spent, jobs=self.jobs)

    def report(
        self,
        job: ClaimedJob,
        outcome: Outcome,
        landed: bool,  # noqa: FBT001 - internal helper, always called with a computed value
        started: float,
        token: CancelToken | None = None,
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
                _settled_line(job, duration)
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

    def _secrets(
        self, handle: Declared | None, kwargs: dict[str, Any] | None
    ) -> tuple[str, ...]:
        """The input's redacted values, kept out of the stored error and the logs (B5)."""
        if handle is None or kwargs is None:
            return ()
        redaction = cached_redaction(handle.definition.redact, self.redact)
        return tuple(redaction.secrets(kwargs))


COMPLETED = str(Outcome.COMPLETED)


def _settled_line(job: ClaimedJob, duration: float) -> None:
    """A success's line (DEBUG, N2; M2's fields)."""
    logger.debug(
        "jobs.attempt.settled",
        extra={
            **job_fields(job),
            "outcome": COMPLETED,
            "duration": round(duration, 6),
        },
    )


def _heard(handle: Declared, job: ClaimedJob) -> bool:
    """Whether somebody must hear of this ending right after the row settles: an
    on_settled hook, job_settled receivers, or a concurrency slot to free."""
    return (
        handle.definition.on_settled is not None
        # An empty receiver list first: has_listeners() walks Django's receiver
        # cache (N2).
        or (bool(job_settled.receivers) and _listened(handle))
        or job.get("lease_key") is not None
    )


# N2: has_listeners() walks every receiver (1.1 µs a job with the one the Django
# Tasks backend connects); its answer for a sender changes only when the receiver
# list does. Per sender: the sender, the list it was asked with, the answer.
_listened_by: dict[int, tuple[Declared, tuple[object, ...], bool]] = {}


def _listened(handle: Declared) -> bool:
    """``job_settled.has_listeners(sender=handle)``, asked again only when the receiver
    list changed (a receiver connected or disconnected) since the last answer."""
    # Django makes an entry (a tuple) at connect(): an equal list is the same
    # receivers. A weak receiver collected since stays listed, its answer True (the
    # completion is then written at once, not batched), until Django drops it, which
    # changes the list. An answer is kept only when the list did not change while
    # it was asked.
    receivers = tuple(job_settled.receivers)
    known = _listened_by.get(id(handle))
    if known is not None and known[0] is handle and known[1] == receivers:
        return known[2]
    answer = job_settled.has_listeners(sender=handle)
    if tuple(job_settled.receivers) == receivers:
        if len(_listened_by) > 1024:  # handles come and go in tests only
            _listened_by.clear()
        _listened_by[id(handle)] = (handle, receivers, answer)
    return answer
