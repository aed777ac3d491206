"""``purge()``: the factory over ``@job`` that trims tables and stores (F3).

A purge is a job. One pass is one run of it:

1. it calls its ``targets`` function (at every attempt, never at import: the stores
   behind a target may be built after the purge is declared) and checks the answer:
   two targets under one name are ``PurgeTargetDuplicate`` before anything is
   deleted, where the second step of that name would otherwise have failed with one
   table already trimmed;
2. it takes ONE clock reading (the database's ``now()``, or the testing clock) in a
   step, so every target of the pass, and every attempt of it, judges "expired"
   against the same instant;
3. it runs each target in its own step (``purge:<target name>``), handing it that
   reading: a killed attempt resumes at the target it stopped on, not at the first.

At least once is safe here: a replayed delete removes rows that are already gone, and
a row a purge deleted answers exactly as one that was never there.

A target is anything with a ``name`` and a ``purge_expired(now) -> int`` answering how
many rows it removed (``PurgeTarget``; ``Target`` wraps a function). Targets that
delete from a table should do it in bounded batches: ``delete_in_batches`` loops a
bounded statement up to a cap per pass and logs what is left when it stops there.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Protocol

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.definition import NO_TENANT
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.handle import JobHandle, job
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.durations import Duration
from ultimate_jobs.ground.exceptions import (
    JobDeclarationInvalid,
    PurgeTargetDuplicate,
    PurgeTargetInvalid,
)
from ultimate_jobs.sql import QUERIES

logger = logging.getLogger(__name__)

CLOCK_STEP = "clock"
STEP_PREFIX = "purge:"
MAX_TARGET_NAME = 200 - len(STEP_PREFIX)  # a step name is at most 200 characters
LEFT_BOUND = 1_000_000  # "what is left" is counted up to this many rows


class PurgeTarget(Protocol):
    """One table or store a purge trims."""

    @property
    def name(self) -> str:
        """Unique within one purge: it names the target's step."""
        ...

    def purge_expired(self, now: datetime) -> int:
        """Delete what expired at ``now`` (the pass's one clock reading); answer how
        many rows went."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """A ``PurgeTarget`` made of a name and a function of the pass's clock reading."""

    name: str
    purge: Callable[[datetime], int]

    def purge_expired(self, now: datetime) -> int:
        return self.purge(now)


Targets = Callable[[], Iterable[PurgeTarget]]


def read_targets(purge_name: str, targets: Targets) -> list[PurgeTarget]:
    """Call ``targets`` and check the answer; nothing is deleted when it is refused."""
    answer = targets()
    if isinstance(answer, str | bytes | Mapping) or not isinstance(answer, Iterable):
        raise PurgeTargetInvalid(
            "targets()", answer, "answers a list of purge targets", job=purge_name
        )
    chosen: list[PurgeTarget] = []
    seen: dict[str, int] = {}
    for index, target in enumerate(answer):
        name = getattr(target, "name", None)
        if not isinstance(name, str) or not name or len(name) > MAX_TARGET_NAME:
            raise PurgeTargetInvalid(
                f"targets()[{index}].name",
                name,
                f"a non-empty string of at most {MAX_TARGET_NAME} characters",
                job=purge_name,
            )
        if not callable(getattr(target, "purge_expired", None)):
            raise PurgeTargetInvalid(
                f"targets()[{index}].purge_expired",
                target,
                "a target has purge_expired(now) answering the rows it removed",
                job=purge_name,
            )
        if name in seen:
            raise PurgeTargetDuplicate(
                f"targets()[{index}].name",
                name,
                f"targets()[{seen[name]}] has the same name; each target is one step "
                "of the pass, so names are unique (nothing was deleted)",
                job=purge_name,
            )
        seen[name] = index
        chosen.append(target)
    return chosen


def _clock(run: Run) -> str:
    """The pass's one clock reading, as stored in its step (ISO 8601)."""
    journal = run.journal_if_any()
    testing_now = journal.now() if journal is not None else None
    [row] = DjangoDatabase(get_settings().DATABASE).run(
        QUERIES["purge_clock"], now=testing_now
    )
    stamp: datetime = row["now"]
    return stamp.isoformat()


def _removed(purge_name: str, target: PurgeTarget, now: datetime) -> int:
    count = target.purge_expired(now)
    return validate.whole(
        count,
        field=f"{target.name}.purge_expired()",
        least=0,
        error=partial(PurgeTargetInvalid, job=purge_name),
        reason="answers the number of rows it removed (a whole number, 0 or more)",
    )


def run_pass(purge_name: str, targets: Targets, run: Run) -> dict[str, int]:
    """One pass: check the targets, read the clock once, one step per target."""
    chosen = read_targets(purge_name, targets)
    now = datetime.fromisoformat(run.step(CLOCK_STEP, lambda: _clock(run)))
    removed: dict[str, int] = {}
    for target in chosen:
        removed[target.name] = run.step(
            STEP_PREFIX + target.name,
            lambda target=target: _removed(purge_name, target, now),
        )
    logger.info(
        "jobs.purge.pass",
        extra={
            "job_id": str(run.job_id),
            "purge": purge_name,
            "now": now.isoformat(),
            "removed": removed,
        },
    )
    return removed


def purge(
    name: str,
    targets: Targets,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    description: str = "",
    retry: Retry | None = None,
    timeout: Duration | None = None,
) -> JobHandle:
    """Declare a purge job: each pass trims every target ``targets()`` answers (F3).

    ::

        sweep = purge(
            "myapp.purge",
            lambda: [Target("sessions", lambda now: purge_sessions(before=now))],
        )

    ``targets`` is a function, called at every attempt. The purge's idempotency key is
    its name, its tenant ``NO_TENANT``; put it on a cron with ``@task``.
    """
    if not isinstance(name, str) or not name:
        raise JobDeclarationInvalid("name", name, "a purge is named (a non-empty str)")
    if not callable(targets):
        raise JobDeclarationInvalid(
            "targets",
            targets,
            "a function answering the targets, called at every attempt (never a "
            "list captured at import)",
            job=name,
        )

    def body(run: Run) -> None:
        run_pass(name, targets, run)

    # One registration per (declaring module, name): the same purge imported twice is
    # one job; the same name declared in two modules is JobNameTaken.
    body.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    body.__name__ = body.__qualname__ = f"purge[{name}]"
    return job(
        name=name,
        idempotency_key=lambda _: name,
        tenant=NO_TENANT,
        queue=queue,
        priority=priority,
        description=description or f"Deletes what expired in the targets of {name}.",
        retry=retry,
        timeout=timeout,
    )(body)


def delete_in_batches(
    target: str,
    batches: Sequence[Callable[[int], int]],
    *,
    left: Callable[[], int],
    batch: int,
    max_batches: int,
) -> int:
    """Run bounded deletes until each removes fewer than ``batch`` rows; answer how
    many went.

    ``batches`` are run in order, each until it comes up short, sharing a cap of
    ``max_batches`` statements per pass: a backlog is trimmed over several passes, each
    of bounded cost, never by one long pass. A pass that stops at the cap logs
    ``jobs.purge.capped`` (warning) with ``left()``, what the target still matches, so
    a backlog shows in the logs; the next pass continues.
    """
    removed = 0
    statements = 0
    for delete in batches:
        while True:
            if statements >= max_batches:
                remaining = left()
                if remaining:
                    logger.warning(
                        "jobs.purge.capped",
                        extra={
                            "target": target,
                            "removed": removed,
                            "statements": statements,
                            "left": remaining,
                        },
                    )
                return removed
            count = delete(batch)
            statements += 1
            removed += count
            if count < batch:
                break
    return removed
