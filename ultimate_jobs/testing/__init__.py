"""Helpers for tests of code that enqueues and runs jobs (X1).

``run_jobs()`` drains the queue in the test's own thread, on the test's own database
connection, through the real SQL a worker runs: the worker's own claimer (the staging
pass, the plain claim for uncapped jobs, the limited claim for capped ones and unknown
names, admission; runtime/claimer.py), then the steps and the fenced settle, with a
clock the test controls: ``travel(timedelta(days=3))`` makes delays, retries, sleeps and
event timeouts due without waiting (the clock stands in for the database's in every
statement the runner makes). ``reset_events()`` forgets published events between tests
that share a database. The ``jobs`` pytest fixture (installed by the pytest plugin) is a
``JobsTestRunner`` with a fresh clock::

    @pytest.mark.django_db
    def test_welcome(jobs):
        send_welcome.enqueue(user_id=1)
        [attempt] = jobs.run()
        assert attempt.outcome == "completed"
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.durable.events import reset_events
from ultimate_jobs.runtime.claimer import Claimer
from ultimate_jobs.runtime.executor import Executor
from ultimate_jobs.runtime.outcomes import Attempt
from ultimate_jobs.runtime.relay import Relay
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.sql import QUERIES
from ultimate_jobs.sql.rows import ClaimedJob


class Clock:
    """Wall-clock time plus an offset the test moves forward with ``travel``."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def travel(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move the clock forward (``travel(timedelta(days=3))`` or ``travel(days=3)``)."""
        step = delta if delta is not None else timedelta(**kwargs)
        if step < timedelta(0):
            raise ValueError("the testing clock only moves forward")
        self.offset += step
        return self.now()


class JobsTestRunner:
    """Runs due jobs inline through the worker's SQL and executor, on a test clock."""

    def __init__(
        self, clock: Clock | None = None, *, jobs: Registry = registry
    ) -> None:
        self.clock = clock or Clock()
        self.jobs = jobs
        self.alias = get_settings().DATABASE
        self.db = DjangoDatabase(self.alias)
        self._scheduler: Any = None

    def now(self) -> datetime:
        return self.clock.now()

    def travel(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        return self.clock.travel(delta, **kwargs)

    def reset_events(self) -> int:
        """Forget every published event (see ``reset_events``)."""
        return reset_events()

    def run_scheduler(self) -> list[Any]:
        """Fire the cron tasks and schedules due at the clock's time (C1-C6).

        The first call takes the scheduler lease and starts every new task's watermark
        at the clock's time; ``travel`` past an occurrence and call it again to fire it.
        Answers the ``Fire`` of each occurrence fired; ``run()`` then runs the jobs.
        """
        if self._scheduler is None:
            self._scheduler = Scheduler(
                db=self.db, clock=self.clock.now, jobs=self.jobs, holder="testing"
            )
        fires: list[Any] = self._scheduler.run_once()
        return fires

    def _body_context(self) -> AbstractContextManager[Any]:
        # Inside a test's transaction, a body's failed statement must not poison it.
        if connections[self.alias].in_atomic_block:
            return _statement_like_savepoint(self.alias)
        return contextlib.nullcontext()

    def run(
        self,
        *,
        until_idle: bool = True,
        queues: Sequence[str] | None = None,
        max_jobs: int | None = None,
    ) -> list[Attempt]:
        """Claim and run due jobs one at a time; answers what each attempt did.

        With ``until_idle`` it goes on until no job is due at the clock's time (jobs the
        bodies enqueue included); otherwise it runs at most one job.
        """
        executor = Executor(
            Settler(self.db, now=self.clock.now),
            jobs=self.jobs,
            body_context=self._body_context,
            # A Ctrl-C of the test run stops it, as Django's ImmediateBackend lets it;
            # every other exception a body raises ends its attempt, as in a worker.
            reraise=(KeyboardInterrupt,),
        )
        claimer = self.claimer(queues)
        attempts: list[Attempt] = []
        while max_jobs is None or len(attempts) < max_jobs:
            self.relay()
            if connections[self.alias].in_atomic_block:
                # S11: the wake trigger fires at a commit, which a test never reaches
                self.db.run(QUERIES["fanin_wake_settled"], now=self.clock.now())
            claimed = self._claim(claimer)
            if claimed is None:
                break
            attempts.append(executor.execute(claimed))
            if not until_idle:
                break
        return attempts

    def relay(self) -> int:
        """Publish the staged outbox rows this connection sees (O1); answer how many.

        ``run()`` calls it before every claim, so a job enqueued inside
        ``transaction.atomic()`` runs like any other. It runs the relay's own pass
        (claim, publish, mark) on the test's connection at the clock's time.
        """
        relay = Relay(db=self.db, now=self.clock.now, relay_id="testing")
        published = 0
        try:
            while True:
                done = relay.run_once()
                if not done.claimed:
                    return published
                published += done.published
        finally:
            relay.close()  # Q1: its connections to the other aliases

    def claimer(self, queues: Sequence[str] | None = None) -> Claimer:
        """The worker's claimer on the test's connection and clock: each claim stages
        first (the clock may have moved), then claims as a worker does, any name
        (an undeclared one is settled X_UNKNOWN_JOB, as a worker of a deploy that
        declares nothing would never see it)."""
        return Claimer(
            self.db,
            jobs=self.jobs,
            queues=list(queues or self.jobs.queues() or ["default"]),
            worker_id="testing",
            lease=get_settings().LEASE,
            stage_every=0.0,
            clock=self.clock.now,
            any_name=True,
        )

    def _claim(self, claimer: Claimer) -> ClaimedJob | None:
        """The next run to execute; rows the round ended (buried, refused, handed
        back, unreadable) are settled and announced by the claimer."""
        while True:
            rows = claimer.run_once(1)
            if rows:
                return rows[0]
            if not claimer.again:
                return None


# Django 6.1 renamed transaction.savepoint() to savepoint_create(); 5.2 has only the former.
_savepoint_create = (
    getattr(transaction, "savepoint_create", None) or transaction.savepoint
)


@contextlib.contextmanager
def _statement_like_savepoint(alias: str) -> Iterator[None]:
    """Keep a body's writes as autocommit would, except those of a failed statement.

    In a worker a body runs in autocommit: its earlier writes stay when it raises. Here
    it runs inside the test's transaction, so it gets a savepoint that is released when
    the body raises an ordinary exception and rolled back only when the database
    aborted the transaction (a failed statement), which autocommit would also have lost.
    """
    connection = connections[alias]
    savepoint = _savepoint_create(using=alias)
    try:
        yield
    except DatabaseError:
        transaction.savepoint_rollback(savepoint, using=alias)
        connection.needs_rollback = False
        raise
    except BaseException:
        if connection.needs_rollback:
            transaction.savepoint_rollback(savepoint, using=alias)
            connection.needs_rollback = False
        else:
            transaction.savepoint_commit(savepoint, using=alias)
        raise
    else:
        transaction.savepoint_commit(savepoint, using=alias)


def run_jobs(
    *,
    until_idle: bool = True,
    now: datetime | None = None,
    queues: Sequence[str] | None = None,
) -> list[Attempt]:
    """Drain due jobs in this thread; ``now`` runs them as if the clock said so."""
    clock = Clock()
    if now is not None:
        clock.offset = now - datetime.now(UTC)
    return JobsTestRunner(clock).run(until_idle=until_idle, queues=queues)


@contextlib.contextmanager
def declared(*handles: Any) -> Iterator[None]:
    """Unregister jobs a test declared on the fly when the block ends."""
    try:
        yield
    finally:
        for handle in handles:
            registry.unregister(handle.name)
