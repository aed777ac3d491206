"""The context of one attempt, made lean (N2): the Run its body receives, its deadlines
only when the job declares a timeout, and its journal only at the body's first durable
verb (run.step, run.sleep, run.progress...). A no-op body costs a Run and a token.

``open_attempt`` builds it; ``Ending`` is how the body ended, which the executor turns
into exactly one outcome (W9).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, cast

from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.declaration.redaction import LazySecrets, Redaction
from ultimate_jobs.declaration.registry import Declared
from ultimate_jobs.declaration.run import CancelToken, Run
from ultimate_jobs.declaration.runlog import RunLogBuffer
from ultimate_jobs.durable.deadlines import Deadlines
from ultimate_jobs.durable.steps import Journal
from ultimate_jobs.ground.exceptions import RunSuspended
from ultimate_jobs.runtime.outcomes import Attempt, Outcome
from ultimate_jobs.sql.rows import ClaimedJob


@dataclass(eq=False, slots=True)
class Ending:
    """One attempt's context and how its body ended: returned, raised or suspended."""

    job: ClaimedJob
    handle: Declared
    kwargs: dict[str, Any]
    run: Run
    token: CancelToken
    started: float
    # None: no timeout, no step_timeout; nothing can end the attempt but the body.
    deadlines: Deadlines | None = None
    # Set when the body ends; made only when a deadline may settle the attempt
    # while the body still runs (a worker's deadline_settler).
    body_ended: threading.Event | None = None
    result: Any = None
    error: BaseException | None = None
    suspension: RunSuspended | None = None

    @property
    def journal(self) -> Journal | None:
        """The journal, if the body's first durable verb made one (the run keeps it)."""
        # The only journal a run of this attempt has is the one open_attempt makes.
        return cast("Journal | None", self.run.journal)

    @property
    def returned(self) -> bool:
        return self.error is None and self.suspension is None

    def progress(self) -> str | None:
        """The progress the body reported and did not yet write (S11), if any."""
        return self.journal.progress.unsaved() if self.journal is not None else None

    def unsettled(self) -> Attempt:
        """An attempt whose outcome nobody could write (its deadline's write failed)."""
        return Attempt(
            self.job["id"],
            self.job["name"],
            Outcome.RETRIED,
            landed=False,
            duration=time.monotonic() - self.started,
            error=self.error,
        )


def open_attempt(
    job: ClaimedJob,
    handle: Declared,
    kwargs: dict[str, Any],
    token: CancelToken,
    started: float,
    *,
    db: Database,
    alias: str,
    now: Any,
    redaction: Redaction,
    log_capacity: int,
    watched: bool,
) -> Ending:
    """The context of one attempt of ``job``: its Run, with the journal made lazily on
    ``db`` (atomic steps on ``alias``), deadlines when the job declares any, and the
    body-ended event when ``watched`` (a deadline settler waits on it)."""
    definition = handle.definition
    timed = definition.timeout is not None or definition.step_timeout is not None
    deadlines = (
        Deadlines(token, step_timeout=definition.step_timeout) if timed else None
    )
    run = Run(
        job_id=job["id"],
        run_id=job["run_id"],
        name=job["name"],
        input=kwargs,
        attempt=job["attempt"],
        max_attempts=job["max_attempts"],
        tenant_id=job["tenant_id"],
        enqueued_by=job["enqueued_by"],
        correlation_id=job["correlation_id"],
        queue=job["queue"],
        cancel_token=token,
        secrets=LazySecrets(redaction, kwargs),
        log_buffer=RunLogBuffer(log_capacity) if log_capacity else None,
    )
    ending = Ending(
        job,
        handle,
        kwargs,
        run,
        token,
        started,
        deadlines=deadlines,
        body_ended=threading.Event() if watched and timed else None,
    )

    def journal() -> Journal:
        # Run.journal_if_any keeps what this answers. The closure holds none of the
        # run, the ending or itself: no reference cycle per attempt, so a drained job's
        # objects go when its last reference does, not at the cyclic collector's next
        # pass (gc.garbage held ~9 objects a job when this closure captured `ending`).
        return Journal(
            db=db,
            atomic_db=DjangoDatabase(alias),
            alias=alias,
            job=job,
            definition=definition,
            token=token,
            deadlines=deadlines,
            now=now,
        )

    run.open_journal = journal
    return ending
