"""django-q2 with the ORM broker: ``manage.py qcluster`` (``workers`` processes)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.systems.base import MANAGE, Client, System

SETTINGS = "benchmarks.peers.djq_settings"


class DjangoQ2(System):
    name = "djq"
    label = "django-q2"
    bulk = False
    concurrency_note = "worker processes of one cluster (Q_CLUSTER workers)"

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        return super().env(record_dir, DJANGO_SETTINGS_MODULE=SETTINGS, **extra)

    def setup(self) -> None:
        self.run([self.python, MANAGE, "migrate", "--noinput", "-v0"])

    def reset(self) -> None:
        self.sql("TRUNCATE django_q_ormq, django_q_task")

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        # the concurrency reaches the settings through BENCH_CONCURRENCY (worker_env)
        return [[self.python, MANAGE, "qcluster"]]

    def worker_env(self, concurrency: int) -> dict[str, str]:
        return {"BENCH_CONCURRENCY": str(concurrency)}


class DjangoQ2Client(Client):
    def open(self) -> None:
        import os

        import django

        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
        django.setup()
        from django_q.tasks import async_task

        self.async_task = async_task

    def enqueue(self, n: int) -> None:
        self.async_task("benchmarks.peers.djq_tasks.noop", n)

    def fill(self, numbers: Sequence[int]) -> None:
        """No bulk API: async_task builds each package (through a broker that only
        collects them), then one bulk INSERT per 1,000 writes what its ORM broker
        would. Setup only, never timed."""
        from django.utils import timezone
        from django_q.brokers.orm import ORM
        from django_q.models import OrmQ

        class Collect(ORM):
            def __init__(self) -> None:
                super().__init__()
                self.packages: list[str] = []

            def enqueue(self, task: str) -> int:
                self.packages.append(task)
                return len(self.packages)

        broker = Collect()
        for n in numbers:
            self.async_task("benchmarks.peers.djq_tasks.noop", n, broker=broker)
        now = timezone.now()
        OrmQ.objects.bulk_create(
            [OrmQ(key=broker.list_key, payload=p, lock=now) for p in broker.packages],
            batch_size=1000,
        )
