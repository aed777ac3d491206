"""django-tasks' database backend (django-tasks-db): ``manage.py db_worker``.

db_worker runs one task at a time; its docs scale it by running more of them, so a
concurrency of N is N db_worker processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.systems.base import MANAGE, Client, System

SETTINGS = "benchmarks.peers.djtasks_settings"


class DjangoTasks(System):
    name = "djtasks"
    label = "django-tasks (db)"
    bulk = False
    concurrency_note = "db_worker processes (one task at a time each)"
    idle_concurrency = 1  # one db_worker process is one worker

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        return super().env(record_dir, DJANGO_SETTINGS_MODULE=SETTINGS, **extra)

    def setup(self) -> None:
        self.run([self.python, MANAGE, "migrate", "--noinput", "-v0"])

    def reset(self) -> None:
        self.sql("TRUNCATE django_tasks_database_dbtaskresult")

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        return [
            [self.python, MANAGE, "db_worker", "--queue-name", "bench"]
            for _ in range(concurrency)
        ]


class DjangoTasksClient(Client):
    def open(self) -> None:
        import os

        import django

        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
        django.setup()
        from benchmarks.peers.djtasks_tasks import noop

        self.noop = noop

    def enqueue(self, n: int) -> None:
        self.noop.enqueue(n)

    def fill(self, numbers: Sequence[int]) -> None:
        """No bulk API: each enqueue builds its row as usual, collected instead of
        saved, then written with one bulk INSERT per 1,000. Setup only, never timed."""
        from django_tasks_db.models import DBTaskResult, get_date_max

        manager = DBTaskResult.objects
        pending: list[DBTaskResult] = []

        def collect(**fields: object) -> DBTaskResult:
            if fields.get("run_after") is None:  # what its save path stores for "now"
                fields["run_after"] = get_date_max()
            pending.append(DBTaskResult(**fields))
            return pending[-1]

        manager.create = collect  # type: ignore[method-assign]
        try:
            for n in numbers:
                self.enqueue(n)
        finally:
            del manager.create
        DBTaskResult.objects.bulk_create(pending, batch_size=1000)
