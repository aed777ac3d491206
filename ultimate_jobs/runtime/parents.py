"""The wake of a parent on another alias (S11, Q1), after its children settle here.

On one database the deferred trigger ``ultimate_jobs_child_settled`` wakes a waiting
parent at the commit of its last child's settle. A child ``run.spawn`` put on another
alias (its queue is routed there) settles where no parent row is: the trigger finds
nothing to wake. So the worker that settled such children (``job_complete`` /
``job_bury`` answer their ``away_parent_id``) does it itself, AFTER that commit:

1. ``fanin_away_settled`` on this alias: of those parents, the ones with no live child
   left here (a fresh snapshot, so of two last children settling at once the later
   one sees both settled);
2. ``fanin_wake_away`` on every other alias holding jobs tables (the parent's is one
   of them): flag the parent's waiting ``wait_for_jobs`` step woken and make the
   suspended parent due now, with a NOTIFY to its queue, as the trigger would.

Best-effort: the settle is already durable, the wake is a second commit on another
database. A worker killed between the two, or a wake that fails (the other database
down), leaves the parent to its ``event_poll`` re-check, the guarantee behind every
wake; a failure is logged ``jobs.fanin.wake-failed`` and never fails the settle. The
operator's cancel of such a child wakes the same way (api/verbs.py). A lapsed lease
buried by a claim makes no wake: the parent sees it at its ``event_poll``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database, DirectDatabase
from ultimate_jobs.sql import QUERIES

logger = logging.getLogger(__name__)


def away_parents(rows: Iterable[Any]) -> list[uuid.UUID]:
    """The ``away_parent_id`` a settle answered, once each, in order."""
    return list(
        dict.fromkeys(
            row["away_parent_id"] for row in rows if row.get("away_parent_id")
        )
    )


def wake_parents_of(db: Database, alias: str | None, rows: Iterable[Any]) -> int:
    """Wake the parents on another alias of the children a settle on ``alias`` just
    committed (``rows``: what job_complete / job_bury answered); nothing when the
    writer does not know its alias (the testing runner). Best-effort, never raises."""
    if alias is None:
        return 0
    return wake_away_parents(db, alias, away_parents(rows))


def wake_away_parents(db: Database, alias: str, parent_ids: list[uuid.UUID]) -> int:
    """Wake, on their own alias, the parents in ``parent_ids`` (whose children settled
    on ``alias``, committed, read through ``db``) that have no live child left here;
    answers how many were made due. Never raises: best-effort (see the module)."""
    if not parent_ids:
        return 0
    try:
        rows = db.run(QUERIES["fanin_away_settled"], parent_ids=parent_ids)
    except Exception as exc:
        logger.warning(
            "jobs.fanin.wake-failed",
            extra={"alias": alias, "parents": _shown(parent_ids), "error": str(exc)},
        )
        return 0
    settled = [row["id"] for row in rows]
    woken = 0
    for other in get_settings().aliases:
        if other == alias or not settled:
            continue
        target = DirectDatabase(other, application_name="ultimate_jobs fan-in wake")
        try:
            due = target.run(QUERIES["fanin_wake_away"], parent_ids=settled, now=None)
        except Exception as exc:
            logger.warning(
                "jobs.fanin.wake-failed",
                extra={"alias": other, "parents": _shown(settled), "error": str(exc)},
            )
            continue
        finally:
            target.close()
        woken += len(due)
        if due:
            logger.info(
                "jobs.fanin.woken",
                extra={"alias": other, "parents": _shown([r["id"] for r in due])},
            )
    return woken


def _shown(ids: list[uuid.UUID]) -> list[str]:
    return [str(i) for i in ids[:20]]
