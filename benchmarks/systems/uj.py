"""ultimate_jobs: ``@job`` in benchmarks.ujapp, ``manage.py jobs_worker``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from benchmarks.systems.base import MANAGE, Client, System

SETTINGS = "benchmarks.settings"


class UltimateJobs(System):
    name = "uj"
    label = "ultimate_jobs"
    concurrency_note = "threads in one process (--concurrency)"

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        return super().env(record_dir, DJANGO_SETTINGS_MODULE=SETTINGS, **extra)

    def setup(self) -> None:
        self.run([self.python, MANAGE, "migrate", "--noinput", "-v0"])

    def reset(self) -> None:
        # CASCADE: steps and events reference jobs; the outbox, leases and counters
        # are emptied too so no scenario inherits another's rows.
        self.sql(
            "TRUNCATE ultimate_jobs_job, ultimate_jobs_worker, ultimate_jobs_outbox,"
            " ultimate_jobs_lease, ultimate_jobs_counter CASCADE"
        )

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        argv = [self.python, MANAGE, "jobs_worker", "--concurrency", str(concurrency)]
        if processes > 1:
            argv += ["--processes", str(processes)]
        return [argv]

    def outbox(self) -> str | None:
        """None when the outbox relay exists, else why the scenario is skipped."""
        return self.driver("has_outbox").get("missing")

    def worker_with_relay(self, concurrency: int) -> list[list[str]]:
        return [
            [
                self.python,
                MANAGE,
                "jobs_worker",
                "--concurrency",
                str(concurrency),
                "--roles",
                "worker,relay",
            ]
        ]


def stamp_commits(client: Client) -> None:
    """Stamp the moment an enqueue's commit returned, before its announcement.

    ``enqueue`` logs ``jobs.enqueued`` (when INFO is on) and sends its signal after the
    commit; a stamp taken when ``enqueue`` returns would charge that work to the
    worker's pickup as a negative (an app logging at INFO would look faster).
    """
    from ultimate_jobs.enqueue import write

    announce = write.announce

    def stamped(*args: Any, **kwargs: Any) -> Any:
        client.commit_ns = time.time_ns()
        return announce(*args, **kwargs)

    write.announce = stamped  # type: ignore[assignment]


class UltimateJobsClient(Client):
    def open(self) -> None:
        import os

        import django

        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
        django.setup()
        from benchmarks.ujapp.jobs import noop

        self.noop = noop
        stamp_commits(self)

    def enqueue(self, n: int) -> None:
        self.noop.enqueue(n=n)

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        self.noop.enqueue_many([{"n": n} for n in numbers])

    def enqueue_outbox(self, n: int) -> None:
        from django.db import transaction

        with transaction.atomic():  # O1: staged in the caller's transaction
            self.noop.enqueue(n=n)

    def has_outbox(self) -> dict[str, str | None]:
        from ultimate_jobs.management.roles import ROLES

        if "relay" not in ROLES:
            return {"missing": "ultimate_jobs has no outbox relay role yet (issue 3)"}
        return {"missing": None}
