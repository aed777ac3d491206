"""PgQueuer: its supervisor ``pgqueuer.run(factory)`` (asyncio, max_concurrent_tasks)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from benchmarks.systems.base import Client, System


class PgQueuer(System):
    name = "pgqueuer"
    label = "PgQueuer"
    concurrency_note = "async tasks in one process (--max-concurrent-tasks)"

    def setup(self) -> None:
        with psycopg.connect(self.dsn) as conn:
            exists = conn.execute(
                "SELECT to_regclass('pgqueuer') IS NOT NULL"
            ).fetchone()
        if not (exists and exists[0]):
            self.run([self.python, "-m", "pgqueuer", "--pg-dsn", self.dsn, "install"])

    def reset(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                    " AND tablename LIKE 'pgqueuer%%'"
                    " AND tablename NOT LIKE '%%schedules'"
                )
            ]
            conn.execute("TRUNCATE " + ", ".join(tables))  # type: ignore[arg-type]

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        return [
            [
                self.python,
                "-m",
                "benchmarks.peers.pgqueuer_app",
            ]
        ]

    def worker_env(self, concurrency: int) -> dict[str, str]:
        return {"BENCH_CONCURRENCY": str(concurrency)}


class PgQueuerClient(Client):
    """PgQueuer's producer as its README shows it: ``Queries`` over ``AsyncpgDriver``,
    driven from this synchronous harness by one event loop kept for the client's life."""

    def open(self) -> None:
        import asyncio
        import os

        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        self.loop = asyncio.new_event_loop()
        self.connection = self.loop.run_until_complete(
            asyncpg.connect(os.environ["DATABASE_URL"])
        )
        self.queries = Queries(AsyncpgDriver(self.connection))

    def close(self) -> None:
        self.loop.run_until_complete(self.connection.close())
        self.loop.close()

    def enqueue(self, n: int) -> None:
        self.loop.run_until_complete(self.queries.enqueue("noop", b"%d" % n))

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        self.loop.run_until_complete(
            self.queries.enqueue(
                ["noop"] * len(numbers),
                [b"%d" % n for n in numbers],
                [0] * len(numbers),
            )
        )
