"""The run context: the first parameter of every job function.

A ``Run`` describes one attempt of one job (ids, input, attempt, tenant, correlation id)
and carries its ``CancelToken``, which the worker sets when the attempt must stop: the
worker is draining (``DRAINING``), the lease was lost (``LEASE_LOST``), an operator
cancelled the job (``CANCELLED``) or a deadline passed (``TIMEOUT``).

The durable verbs (``step``, ``atomic_step``, ``sleep``, ``wait_for_event``,
``reschedule``, ``progress``) are kept by the attempt's ``Journal`` (steps.py); a Run
made outside a worker or the testing runner has none, and refuses them.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ultimate_jobs.declaration.runlog import RunLogBuffer, RunLogger
from ultimate_jobs.ground.cancel import CANCELLED as CANCELLED
from ultimate_jobs.ground.cancel import DRAINING as DRAINING
from ultimate_jobs.ground.cancel import LEASE_LOST as LEASE_LOST
from ultimate_jobs.ground.cancel import TIMEOUT as TIMEOUT
from ultimate_jobs.ground.cancel import CancelToken as CancelToken
from ultimate_jobs.ground.durations import Duration


class ProgressReport(Protocol):
    """Where ``run.progress`` writes (durable/progress.py, ``Progress``)."""

    def report(self, done: object, total: object, note: object = None) -> None: ...


class Journal(Protocol):
    """What keeps a Run's durable verbs (S1-S11): the attempt's journal of steps,
    ``durable.steps.Journal``. Declared here, beside the Run, so this layer imports
    nothing above it."""

    @property
    def progress(self) -> ProgressReport: ...

    @property
    def now(self) -> Callable[[], Any]:
        """The attempt's clock: the testing clock's time, or None (the database's)."""
        ...

    def step(self, name: str, fn: Callable[..., Any]) -> Any: ...

    def atomic_step(
        self, name: str, fn: Callable[..., Any], *, using: str | None = None
    ) -> Any: ...

    def sleep(
        self, name_or_duration: str | Duration, duration: Duration | None
    ) -> None: ...

    def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Mapping[str, Any] | None = None,
        timeout: Duration | None = None,
        timeout_ok: bool = False,
    ) -> Any: ...

    def reschedule(
        self,
        *,
        delay: Duration | None = None,
        run_at: Any = None,
        input: Mapping[str, Any] | None = None,
    ) -> None: ...

    def spawn(self, name: str, handle: object, input: dict[str, Any]) -> Any: ...

    def spawn_many(self, name: str, handle: object, inputs: object) -> Any: ...

    def wait_for_jobs(
        self, name: str, children: object, timeout: Duration | None = None
    ) -> Any: ...


@dataclass(eq=False)
class Run:
    """One attempt of one job, as its body sees it."""

    job_id: uuid.UUID
    run_id: uuid.UUID
    name: str
    input: dict[str, Any] = field(repr=False)  # may hold redacted values (B5)
    attempt: int
    max_attempts: int
    tenant_id: str | None
    enqueued_by: str = ""
    correlation_id: str = ""
    queue: str = "default"
    cancel_token: CancelToken = field(default_factory=CancelToken)
    journal: Journal | None = field(default=None, repr=False)
    # Makes the journal at the run's first durable verb (N2: a body that uses none
    # costs no journal); the executor passes it.
    open_journal: Callable[[], Journal] | None = field(default=None, repr=False)
    # The input's redacted values (B5): run.logger replaces them in what it logs.
    secrets: Collection[str] = field(default=(), repr=False)
    # The attempt's kept log lines (runlog.py); None: run.logger keeps nothing.
    log_buffer: RunLogBuffer | None = field(default=None, repr=False)

    @functools.cached_property
    def logger(self) -> RunLogger:
        """The run's logger (made at its first use: N2)."""
        return RunLogger(
            logging.getLogger("ultimate_jobs.run"),
            {
                "job_id": str(self.job_id),
                "run_id": str(self.run_id),
                "job_name": self.name,
                "attempt": self.attempt,
                "tenant_id": self.tenant_id,
                "correlation_id": self.correlation_id,
            },
            buffer=self.log_buffer,
            secrets=self.secrets,
        )

    @property
    def final_attempt(self) -> bool:
        """True when a failure now would not be retried for want of attempts (R3)."""
        return self.attempt >= self.max_attempts

    @property
    def cancelled(self) -> bool:
        """The same as ``run.cancel_token.is_set()``."""
        return self.cancel_token.is_set()

    # -- durable steps (S1-S9; docs/steps.md) ----------------------------------------

    def journal_if_any(self) -> Journal | None:
        """The attempt's journal (made now if it was not yet), None outside a claimed
        run."""
        if self.journal is None and self.open_journal is not None:
            self.journal = self.open_journal()
        return self.journal

    def _journal(self) -> Journal:
        journal = self.journal_if_any()
        if journal is None:
            raise RuntimeError(
                "this Run has no journal: steps need a claimed run (a worker, or the "
                "testing runner's jobs.run())"
            )
        return journal

    def step(self, name: str, fn: Callable[..., Any]) -> Any:
        """Run ``fn`` once ever for this job and answer its JSON result (S1).

        A later attempt answers the stored result without calling ``fn``. ``fn`` takes
        no argument, or the cancel token. A name used twice in one attempt is
        StepDuplicate (S2); a step that raises records nothing.
        """
        return self._journal().step(name, fn)

    def atomic_step(
        self, name: str, fn: Callable[..., Any], *, using: str | None = None
    ) -> Any:
        """Like ``step``, with ``fn``'s writes and the checkpoint in ONE transaction
        on the jobs database (S9): exactly once for writes there. ``using`` is the
        alias ``fn`` writes (default "default"); another alias than the jobs one is
        refused."""
        return self._journal().atomic_step(name, fn, using=using)

    def sleep(
        self, name_or_duration: str | Duration, duration: Duration | None = None
    ) -> None:
        """Suspend the run for a duration (S3): ``run.sleep("3d")`` or
        ``run.sleep("nudge-wait", "3d")``. Raises RunSuspended, which the body must
        not catch; on wake the body replays from the top and the sleep returns."""
        self._journal().sleep(name_or_duration, duration)

    def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Mapping[str, Any] | None = None,
        timeout: Duration | None = None,
        timeout_ok: bool = False,
    ) -> Any:
        """Suspend until ``publish_event(event, payload)`` publishes a payload that
        contains ``match``, and answer that payload (S4). Past ``timeout`` raise
        EventTimeout (a JobTimeout), or answer None when ``timeout_ok``."""
        return self._journal().wait_for_event(
            name, event, match=match, timeout=timeout, timeout_ok=timeout_ok
        )

    def spawn(self, name: str, handle: Any, /, **input: Any) -> Any:
        """Enqueue ``handle(**input)`` as a child job, as the step ``name`` (S10): the
        child row and the checkpoint commit together, so a replay answers the same
        child (an ``Enqueued``) and a crash never loses or doubles it."""
        return self._journal().spawn(name, handle, input)

    def spawn_many(self, name: str, handle: Any, inputs: Any) -> Any:
        """Enqueue one child per input (a list of dicts of keyword arguments) as the
        steps ``name[0]``, ``name[1]``...: every child and checkpoint in one
        transaction (S10). Answers one ``Enqueued`` per input, in order."""
        return self._journal().spawn_many(name, handle, inputs)

    def wait_for_jobs(
        self, name: str, children: Any, timeout: Duration | None = None
    ) -> Any:
        """Suspend until every child (``Enqueued`` answers or job ids) has settled and
        answer one ``Outcome(id, state, result, error)`` per child, in order (S11).
        Past ``timeout`` raise FanInTimeout (a JobTimeout)."""
        return self._journal().wait_for_jobs(name, children, timeout)

    def reschedule(
        self,
        *,
        delay: Duration | None = None,
        run_at: Any = None,
        input: Mapping[str, Any] | None = None,
    ) -> None:
        """When the body returns, run this job again as a new stage (S5): ``input``
        (default: the current one), due after ``delay`` or at ``run_at``, with a fresh
        attempt budget. Checked now; dropped if the body raises."""
        self._journal().reschedule(delay=delay, run_at=run_at, input=input)

    def progress(self, done: float, total: float, note: str | None = None) -> None:
        """Record how far the job has come (S7); written at most once a second."""
        self._journal().progress.report(done, total, note)
