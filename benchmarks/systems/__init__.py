"""The systems under test: ultimate_jobs and its peers, one module each.

Each module holds both sides of one system:

* a ``System`` subclass the orchestrator uses (schema, reset, how to start a worker),
* a ``Client`` the driver process uses to enqueue through the system's public API
  (``python -m benchmarks.driver <system> <command>``), so an enqueue is always timed
  in a process of its own, the way an application would call it.
"""

from __future__ import annotations

from benchmarks.systems.base import System
from benchmarks.systems.celery_ import Celery
from benchmarks.systems.djq import DjangoQ2
from benchmarks.systems.djtasks import DjangoTasks
from benchmarks.systems.pgqueuer_ import PgQueuer
from benchmarks.systems.procrastinate_ import Procrastinate
from benchmarks.systems.uj import UltimateJobs

ALL: dict[str, type[System]] = {
    cls.name: cls
    for cls in (UltimateJobs, PgQueuer, Procrastinate, DjangoQ2, DjangoTasks, Celery)
}

__all__ = ["ALL", "System"]
