"""An attempt past its deadline (S6): in a worker the attempt is failed at the deadline
itself, on a settler of its own, while the body may run on fenced out; a body still
running after ``OVERRUN_GRACE`` holds its thread (lost capacity), one that finishes
anyway is logged as abandoned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.durable.deadlines import ATTEMPT
from ultimate_jobs.ground.context import tenant_scope
from ultimate_jobs.ground.exceptions import JobTimeout
from ultimate_jobs.observability import metrics
from ultimate_jobs.runtime.attempt import Ending
from ultimate_jobs.runtime.finish import Finisher
from ultimate_jobs.runtime.outcomes import job_fields
from ultimate_jobs.runtime.settle import Settler

logger = logging.getLogger(__name__)
# How long a body may take to stop after its deadline set its token before it counts
# as one that ignores it (a body that looks at its token every step stops within it).
OVERRUN_GRACE = 1.0


def settle_at_deadline(
    ending: Ending,
    finish: Finisher,
    deadline_settler: Callable[[], Settler] | None,
    before_settle: Callable[[], None] | None,
    on_overrun: Callable[[], None] | None = None,
) -> None:
    """S6, in a worker: fail the attempt now; the body may go on, fenced out."""
    deadlines = ending.deadlines
    if deadline_settler is None or deadlines is None or not deadlines.settle_once():
        return
    settler = deadline_settler()
    settler.before_write = before_settle
    try:
        with tenant_scope(ending.job["tenant_id"]):
            deadlines.outcome = finish.failed(
                ending.job,
                ending.handle,
                ending.kwargs,
                timeout_error(ending),
                ending.token,
                ending.started,
                settler=settler,
                progress=ending.progress(),
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
    if ending.body_ended is not None and not ending.body_ended.wait(OVERRUN_GRACE):
        overrun(ending, finish, on_overrun)


def timeout_error(ending: Ending) -> JobTimeout:
    """The error the attempt fails with: which deadline passed, and its length."""
    definition: JobDefinition = ending.handle.definition
    what = (ending.deadlines.expired if ending.deadlines else None) or ATTEMPT
    if what == ATTEMPT:
        message = f"the attempt ran past its timeout ({definition.timeout or 0:g}s)"
    else:
        message = (
            f"{what} ran past its step_timeout ({definition.step_timeout or 0:g}s)"
        )
    error = JobTimeout(f"{definition.name}: {message}")
    error.__cause__ = ending.error
    return error


def overrun(
    ending: Ending, finish: Finisher, on_overrun: Callable[[], None] | None
) -> None:
    """S6: the deadline passed with the body still running. Nothing can stop a
    thread: it stays busy until the body looks at its token or returns. Logged,
    counted (``ultimate_jobs_bodies_abandoned_total``) and reported (the worker's
    registry row and readiness) as lost capacity."""
    logger.error("jobs.timeout.overrun", extra=_fields(ending))
    metrics.body_abandoned(ending.job["queue"], ending.job["name"], jobs=finish.jobs)
    if on_overrun is not None:
        on_overrun()


def abandoned(ending: Ending) -> None:
    """S6: the body ignored its cancelled token and finished anyway."""
    logger.error("jobs.timeout.abandoned", extra=_fields(ending))


def _fields(ending: Ending) -> dict[str, Any]:
    return {
        **job_fields(ending.job),
        "deadline": ending.deadlines.expired if ending.deadlines else None,
        "ran_for": round(time.monotonic() - ending.started, 3),
    }
