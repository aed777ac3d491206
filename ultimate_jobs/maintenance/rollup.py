"""The counter roll-up chore (P5): every ``ROLLUP_EVERY`` while leading, fold ageing
counter buckets into wider ones (observability/counters.py, ``rollup``).

The first roll-up comes ``ROLLUP_EVERY`` after leadership begins; a failure is logged
and tried again at the next cadence (the buckets only stay narrower meanwhile).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from ultimate_jobs.db import Database
from ultimate_jobs.ground.exceptions import QueryError
from ultimate_jobs.observability import counters

logger = logging.getLogger(__name__)

ROLLUP_EVERY = timedelta(minutes=5)  # how often the leader folds counter buckets


class RollUp:
    """Fold counter buckets every ROLLUP_EVERY."""

    name = "rollup"

    def __init__(self) -> None:
        self.rolled_up_at: datetime | None = None

    def begin(self, current: datetime) -> None:
        """Leadership (re)began: the next roll-up is ROLLUP_EVERY from now."""
        self.rolled_up_at = current

    def due(self, current: datetime) -> bool:
        if self.rolled_up_at is None:
            self.rolled_up_at = current
        return current - self.rolled_up_at >= ROLLUP_EVERY

    def run_once(
        self, db: Database, current: datetime, driven: datetime | None
    ) -> dict[str, int] | None:
        """One roll-up; answers the rows it moved (None: it failed and was logged)."""
        self.rolled_up_at = current
        try:
            return counters.rollup(db, now=driven)
        except QueryError as exc:
            logger.warning("jobs.counters.rollup-failed", extra={"error": str(exc)})
            return None
