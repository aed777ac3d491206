"""Procrastinate: ``procrastinate worker`` (asyncio, --concurrency) on its own schema."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from benchmarks.systems.base import Client, System

APP = "benchmarks.peers.procrastinate_app.app"


class Procrastinate(System):
    name = "procrastinate"
    label = "Procrastinate"
    concurrency_note = "async tasks in one process (--concurrency)"

    def setup(self) -> None:
        with psycopg.connect(self.dsn) as conn:
            exists = conn.execute(
                "SELECT to_regclass('procrastinate_jobs') IS NOT NULL"
            ).fetchone()
        if not (exists and exists[0]):
            self.run(
                [self.python, "-m", "procrastinate", "--app", APP, "schema", "--apply"]
            )

    def reset(self) -> None:
        self.sql("TRUNCATE procrastinate_jobs CASCADE")

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        return [
            [
                self.python,
                "-m",
                "procrastinate",
                "--app",
                APP,
                "worker",
                "--queues",
                "bench",
                "--concurrency",
                str(concurrency),
            ]
        ]


class ProcrastinateClient(Client):
    def open(self) -> None:
        from benchmarks.peers.procrastinate_app import app, noop

        self.app = app.open()
        self.noop = noop

    def close(self) -> None:
        self.app.close()

    def enqueue(self, n: int) -> None:
        self.noop.defer(n=n)

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        self.noop.batch_defer(*({"n": n} for n in numbers))
