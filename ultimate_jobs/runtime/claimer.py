"""The claimer: one claim round, stage → plain → limited → admit (W2, W5, L1-L3).

``run_once(limit)`` answers the runs to start, at most ``limit``:

0. after a wake (``claim_soon()``) the claims come first, in one hop: the staging
   pass runs in the same round only when they find nothing;
1. the staging pass (``job_stage``) owns every time-driven move: due delayed and
   suspended rows and lapsed leases made ready, a lapse on the final attempt buried
   and announced here (W5). It runs at most once per ``stage_every`` seconds, or at
   once when ``stage_soon()`` was asked (a wake, a local timer); while idle it is the
   one statement of a poll, since it also says whether ready work waits (N1);
2. the plain claim (``job_claim_plain``) takes ready rows of the declared names
   without a fleet cap;
3. the limited claim (``job_claim``) the capped names, and every name under a
   budget (L1-L3); with ``any_name`` (the testing runner) any name, so an undeclared
   one is settled X_UNKNOWN_JOB by the executor;
4. admission (admission.py) triages each claimed row before its body may run.

Both claims take 'ready' rows only. A worker and the testing runner
(``ultimate_jobs.testing``) run this same sequence; the worker on its own connection at
the database's time, the runner on the test's connection at the test clock's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from ultimate_jobs.db import DirectDatabase, DjangoDatabase, hot_door
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.limits.budgets import Budget, claim_parameters, fleet_caps
from ultimate_jobs.observability import metrics
from ultimate_jobs.observability.redaction import logged_correlation
from ultimate_jobs.runtime.admission import Admission, admit
from ultimate_jobs.runtime.outcomes import Outcome, announce
from ultimate_jobs.runtime.rides import NO_RIDE
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.runtime.unreadable import bury_unreadable
from ultimate_jobs.sql import Query, arrays
from ultimate_jobs.sql.rows import (
    JOB_CLAIM,
    JOB_CLAIM_PLAIN,
    JOB_STAGE,
    ClaimedJob,
    Staged,
)

logger = logging.getLogger(__name__)

# The most rows one staging pass (job_stage) makes ready; a full pass stages again.
STAGE_BATCH = 500


class Claimer:
    """Claims for one worker (or the testing runner) on one database connection."""

    def __init__(
        self,
        db: DirectDatabase | DjangoDatabase,
        *,
        jobs: Registry,
        queues: Sequence[str],
        worker_id: str,
        lease: float,
        stage_every: float,
        budget: Budget | None = None,
        holding: Callable[[], Sequence[ClaimedJob]] = tuple,
        clock: Callable[[], datetime] | None = None,
        any_name: bool = False,
        tally: dict[str, int] | None = None,
    ) -> None:
        self.db = db  # the stage and the claims go through its hot door (db.py)
        self.jobs = jobs
        self.queues = list(queues)
        self.worker_id = worker_id
        self.lease = lease
        self.stage_every = stage_every
        self.budget = budget or Budget()
        self.holding = holding  # the runs held now, for the budgets' room (L3)
        self.clock = clock  # None: the database's time
        self.any_name = any_name
        self.tally = tally if tally is not None else {}  # outcomes of admission
        self.ended = 0  # rows the last round ended without running them
        capped = set(fleet_caps(jobs)["cap_names"])
        names = sorted(handle.name for handle in jobs)
        if self.budget.limits.bounded:
            capped = set(names)
        self.plain_names = [name for name in names if name not in capped]
        self.limited_names = [name for name in names if name in capped]
        # The array parameters of the plain claim and the staging pass never change:
        # packed once (sql/arrays.py), not dumped element by element per statement.
        self._packed_queues = arrays.texts(self.queues)
        self._packed_plain_names = arrays.texts(self.plain_names)
        self._packed_names = arrays.texts(names)
        self.dropped = [h.name for h in jobs if not h.definition.dead_letter]
        # An idle worker's registry row rides its staging pass (W8, issue 26): ``carry``
        # answers the worker id when the row is due a refresh, ``carried`` hears back
        # (runtime/heartbeat.py). The testing runner carries none.
        self.carry: Callable[[], str | None] = lambda: None
        self.carried: Callable[[float, Staged], None] = lambda *_: None
        # So do the leader lease and the relay's idle poll of the worker's process
        # (C3, O2, N2; runtime/rides.py): ``ride`` answers the pass's parameters for
        # them, ``rode`` hears the answer.
        self.ride: Callable[[], dict[str, Any]] = lambda: NO_RIDE
        self.rode: Callable[[float, Staged], None] = lambda *_: None
        self._staged_at = float("-inf")
        self._stage_now = False
        self._claim_now = False

    def stage_soon(self) -> None:
        """Run the staging pass in the next round (a row may have come due)."""
        self._stage_now = True

    def claim_soon(self) -> None:
        """Claim at once in the next round, before any staging pass: a wake says a
        row was made ready (N1), so the one statement that takes it is the claim. A
        claim that finds nothing stages next (the wake may be for a row not ready yet:
        a resumed wait, a promotion) and claims again."""
        self._claim_now = True

    def run_once(self, limit: int, *, prefetch: int = 0) -> list[ClaimedJob]:
        """One round: the runs to start, in claim order: at most ``limit``, and up to
        ``prefetch`` more of the plain names (the worker's PREFETCH: never a capped
        name nor under a budget, which get exactly ``limit``)."""
        self.ended = 0
        started = time.monotonic()
        rows: list[ClaimedJob] = []
        if self._claim_now:
            self._claim_now = False
            rows = self._claims(limit, prefetch)
            if not rows and not self.ended:
                self._stage_now = True
        if not rows:
            if not self._staged_or_due() and not self.any_name:
                return []  # nothing due, nothing ready: the idle poll was one statement
            rows = self._claims(limit, prefetch)
        metrics.claim_finished(time.monotonic() - started)
        admitted: list[ClaimedJob] = []
        now = self._now()
        for row in rows:
            admission = admit(self.db, self.jobs, row, now=now)
            if admission is not Admission.RUN:
                self.ended += 1
                self.tally[str(admission)] = self.tally.get(str(admission), 0) + 1
                continue
            admitted.append(row)
        self.budget.started(admitted)  # one rate token per admitted run (L3)
        return admitted

    def _claims(self, limit: int, prefetch: int = 0) -> list[ClaimedJob]:
        """The plain claim (``prefetch`` rows past ``limit`` too), then the limited one
        for what room it left of ``limit``."""
        rows = self._claim_plain(limit + prefetch)
        if (self.limited_names or self.any_name) and len(rows) < limit:
            rows += self._claimed_rows(
                JOB_CLAIM,
                queues=self.queues,
                limit=limit - len(rows),
                worker_id=self.worker_id,
                lease_seconds=self.lease,
                names=None if self.any_name else self.limited_names,
                now=self._now(),
                **claim_parameters(
                    self.jobs, self.budget, queues=self.queues, held=self.holding()
                ),
            )
        return rows

    @property
    def again(self) -> bool:
        """Whether the last round left work a next round may find at once: rows it
        ended (buried, refused, handed back) or a full staging batch."""
        return bool(self.ended) or self._stage_now

    def _now(self) -> datetime | None:
        return self.clock() if self.clock is not None else None

    def _staged_or_due(self) -> bool:
        """Run the staging pass when it is due; answer whether a claim may find work.
        A busy worker stages once per ``stage_every`` (W2, W5)."""
        now = time.monotonic()
        if not self._stage_now and now - self._staged_at < self.stage_every:
            return True
        self._stage_now = False
        self._staged_at = now
        staged, ready = self._stage()
        if staged >= STAGE_BATCH:
            self._stage_now = True  # more are due: stage again next round
        return bool(staged or ready)

    def _stage(self) -> tuple[int, bool]:
        """One staging pass (job_stage): due delayed rows and lapsed leases made ready,
        lapsed final attempts buried and announced (W5); an idle worker's registry row
        refreshed when it is due (W8), its process's leader lease renewed and outbox
        looked at when they ride (C3, O2)."""
        registry = self.carry()
        riders = self.ride()
        sent_at = time.monotonic()
        rows: list[Staged] = hot_door(self.db)(
            JOB_STAGE,
            queues=self._packed_queues,
            limit=STAGE_BATCH,
            dropped=self.dropped,
            names=self._packed_names,
            registry=registry,
            registry_lease=self.lease,
            now=self._now(),
            **riders,
        )
        self._bury_unreadable()
        if not rows:
            return 0, False
        if registry is not None:
            self.carried(sent_at, rows[0])
        self.rode(sent_at, rows[0])
        for row in rows:
            if row["id"] is not None:
                self.ended += 1
                self._announce_exhausted(_buried(row))
        return rows[0]["staged"], rows[0]["ready"]

    def _claim_plain(self, limit: int) -> list[ClaimedJob]:
        if not self.plain_names or limit <= 0:
            return []
        return self._claimed_rows(
            JOB_CLAIM_PLAIN,
            queues=self._packed_queues,
            limit=limit,
            worker_id=self.worker_id,
            lease_seconds=self.lease,
            names=self._packed_plain_names,
            now=self._now(),
        )

    def _claimed_rows(
        self, query: Query[ClaimedJob], **params: Any
    ) -> list[ClaimedJob]:
        """One claim statement's rows; those Python cannot read are settled at once,
        never retried (B4), before the next statement on ``db`` forgets them."""
        rows: list[ClaimedJob] = hot_door(self.db)(query, **params)
        self._bury_unreadable()
        return rows

    def _bury_unreadable(self) -> None:
        unreadable = self.db.unreadable
        if unreadable:
            self.ended += len(unreadable)
            settler = Settler(self.db, now=self.clock or (lambda: None))
            bury_unreadable(settler, unreadable, dropped=self.dropped)

    def _announce_exhausted(self, row: ClaimedJob) -> None:
        """W5: a lapsed lease on the final attempt was buried by the staging pass."""
        logger.error(
            "jobs.claim.exhausted",
            extra={
                "job_id": str(row["id"]),
                "job_name": row["name"],
                "attempt": row["attempt"],
                "error": "LEASE_LAPSED_FINAL_ATTEMPT",
                "correlation_id": logged_correlation(row),
            },
        )
        metrics.job_buried(row, jobs=self.jobs)
        if row["name"] in self.jobs:
            dead = row["state"] == "dead"
            outcome = Outcome.DEAD_LETTERED if dead else Outcome.DROPPED
            announce(self.jobs.get(row["name"]), row, None, outcome)


_SUMMARY = (
    "staged",
    "ready",
    "registered",
    "drain",
    "led",
    "schedules_revision",
    "db_now",
    "outbox",
)


def _buried(row: Staged) -> ClaimedJob:
    """A row job_stage buried, in the shape announcements take."""
    fields = {k: v for k, v in row.items() if k not in _SUMMARY}
    return cast(ClaimedJob, {"refused": False, **fields, "lease_key": None})
