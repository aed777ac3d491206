"""ultimate_jobs in a realistic app (benchmarks/realapp): the default roles.

Only the pickup scenario uses it (``pickup-app``, benchmarks/pickup_app.py): a worker
with the default roles (worker, scheduler, relay), ~40 declared jobs on four queues,
a few cron tasks, INFO logging to a file and a body writing one row through the ORM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from benchmarks.systems.base import MANAGE, Client
from benchmarks.systems.uj import UltimateJobs, stamp_commits

SETTINGS = "benchmarks.settings_realapp"


class UltimateJobsApp(UltimateJobs):
    name = "uj-app"
    label = "ultimate_jobs (realistic app)"

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        extra.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
        extra = {**self.variant, **extra}
        return super(UltimateJobs, self).env(record_dir, **extra)

    def reset(self) -> None:
        super().reset()
        self.sql("TRUNCATE bench_real_visit")

    def __init__(self, dsn: str, python: str = sys.executable) -> None:
        super().__init__(dsn, python)
        self.log_file = os.devnull  # the worker's INFO log (pickup_app.py sets a file)
        # BENCH_DEBUG, BENCH_PROMETHEUS (benchmarks/settings_realapp.py)
        self.variant: dict[str, str] = {}

    def worker_env(self, concurrency: int) -> dict[str, str]:
        return {"BENCH_LOG_FILE": self.log_file}

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        # no --roles: the default roles, as a project runs ``manage.py jobs_worker``
        return [[self.python, MANAGE, "jobs_worker", "--concurrency", str(concurrency)]]


class UltimateJobsAppClient(Client):
    def open(self) -> None:
        import django

        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
        django.setup()
        from benchmarks.realapp.jobs import visit

        self.visit = visit
        stamp_commits(self)

    def enqueue(self, n: int) -> None:
        self.visit.enqueue(n=n)

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        self.visit.enqueue_many([{"n": n} for n in numbers])
