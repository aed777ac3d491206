"""PgQueuer: the factory its runner calls, with one async no-op entrypoint.

On asyncpg (``AsyncpgDriver``), the driver PgQueuer's README uses first for both the
consumer and the producer; its psycopg driver measured 1.65x slower on this harness
(issue 26), and a ratio won against a slower driver than the peer recommends is no
ratio at all.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

from benchmarks.record import record

CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "4"))


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ["DATABASE_URL"])
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            record(int(job.payload or b"0"))

        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    # `pgq run benchmarks.peers.pgqueuer_app:main` is the documented command, but the
    # CLI of pgqueuer 1.6.0 fails before starting (its --log-level parser hands a str
    # where an enum is expected); pgqueuer.run is the same supervisor, called directly,
    # on the same event loop the CLI picks (uvloop when installed).
    from pgqueuer import run
    from pgqueuer.adapters.cli.cli import asyncio_run

    # Configured for throughput as PgQueuer documents it: each dequeue takes a whole
    # batch of `concurrency` jobs (`--batch-size`, "jobs to pull from the queue at
    # once"), and `max_concurrent_tasks` is the smallest cap PgQueuer accepts with that
    # batch (it requires max_concurrent_tasks >= 2 x batch_size), so one batch runs
    # while the next is fetched.
    asyncio_run(run(main, batch_size=CONCURRENCY, max_concurrent_tasks=2 * CONCURRENCY))
