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
    def open(self) -> None:
        import os

        from pgqueuer.db import SyncPsycopgDriver
        from pgqueuer.queries import SyncQueries

        self.connection = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        self.queries = SyncQueries(SyncPsycopgDriver(self.connection))

    def close(self) -> None:
        self.connection.close()

    def enqueue(self, n: int) -> None:
        self.queries.enqueue("noop", b"%d" % n)

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        self.queries.enqueue(
            ["noop"] * len(numbers), [b"%d" % n for n in numbers], [0] * len(numbers)
        )
