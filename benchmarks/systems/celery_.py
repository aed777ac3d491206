"""Celery on Redis (not PostgreSQL): ``celery worker`` with the prefork pool."""

from __future__ import annotations

import os
from collections.abc import Sequence

from benchmarks.systems.base import Client, System

REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")


class Celery(System):
    name = "celery"
    label = "Celery (Redis)"
    bulk = False
    postgres = False
    concurrency_note = "prefork processes (-c)"

    def available(self) -> str | None:
        try:
            import redis

            redis.Redis.from_url(REDIS, socket_timeout=1).ping()
        except Exception as exc:
            return f"no Redis at {REDIS} ({exc.__class__.__name__})"
        return None

    def setup(self) -> None:
        pass

    def reset(self) -> None:
        import redis

        redis.Redis.from_url(REDIS).flushdb()  # its own database number only

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        return [
            [
                self.python,
                "-m",
                "celery",
                "-A",
                "benchmarks.peers.celery_app",
                "worker",
                "-c",
                str(concurrency),
                "-Q",
                "bench",
                "-l",
                "WARNING",
            ]
        ]


class CeleryClient(Client):
    def open(self) -> None:
        from benchmarks.peers.celery_app import noop

        self.noop = noop

    def enqueue(self, n: int) -> None:
        self.noop.delay(n)

    def fill(self, numbers: Sequence[int]) -> None:
        for n in numbers:
            self.enqueue(n)
