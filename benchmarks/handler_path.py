"""The handler path's CPU per job, in one thread, without the worker's other threads.

    DATABASE_URL=postgres://... python -m benchmarks.handler_path [JOBS] [ROUNDS]

Each round empties the job tables, enqueues JOBS no-op jobs (benchmarks.ujapp), claims
them all, then one fresh thread runs each as a handler thread does (``Ledger.add``,
``Executor.execute`` with batched completions on a one-connection pool,
``Ledger.remove``) and reads its own CPU time (``time.thread_time``): the figure moves
far less with the machine's load than a drain's wall clock or its process CPU. The
batching writer's thread is not counted. Prints the microseconds per job of each round.
Uses the database in DATABASE_URL (``benchmarks.settings``): its job tables are
TRUNCATEd.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any


def handle_all(rows: list[Any], ledger: Any, executor: Any, spent: list[float]) -> None:
    """Run ``rows`` one after another as a handler thread does; note the CPU spent."""
    start = time.thread_time()
    for row in rows:
        entry = ledger.add(row)
        executor.execute(entry.row, entry.token)
        ledger.remove(entry)
    spent.append(time.thread_time() - start)


def main(jobs: int, rounds: int) -> list[float]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    os.environ.setdefault("BENCH_RECORD_DIR", tempfile.mkdtemp(prefix="uj-handler-"))
    import django

    django.setup()
    from django.db import connection

    from benchmarks.ujapp.jobs import noop
    from tests import claiming
    from ultimate_jobs.db import DatabasePool, DirectDatabase
    from ultimate_jobs.runtime.acks import Acks
    from ultimate_jobs.runtime.executor import Executor
    from ultimate_jobs.runtime.held import Ledger
    from ultimate_jobs.runtime.settle import Settler

    figures = []
    for index in range(rounds):
        with connection.cursor() as cursor:
            cursor.execute(
                "TRUNCATE ultimate_jobs_job, ultimate_jobs_worker, ultimate_jobs_outbox,"
                " ultimate_jobs_lease, ultimate_jobs_counter CASCADE"
            )
        noop.enqueue_many([{"n": n} for n in range(index * jobs, (index + 1) * jobs)])
        db = DirectDatabase("default")
        rows: list[Any] = []
        while len(rows) < jobs:
            rows += claiming.claim(
                db,
                queues=["bench"],
                limit=500,
                worker_id="handler-path",
                lease_seconds=300.0,
                names=None,
                now=None,
            )
        pool = DatabasePool("default", size=1, application_name="handler-path")
        pool.open()
        acks = Acks(db)
        executor = Executor(
            Settler(pool, retry_for=30.0), manage_connections=True, acks=acks
        )
        spent: list[float] = []

        thread = threading.Thread(
            target=handle_all, args=(rows, Ledger(), executor, spent)
        )
        thread.start()
        thread.join()
        acks.close(60)
        pool.close()
        db.close()
        figures.append(spent[0] / jobs * 1e6)
    return figures


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    made = "BENCH_RECORD_DIR" not in os.environ
    try:
        result = main(count, repeat)
    finally:
        if made:  # the bodies' records, only ever read by the drain scenarios
            shutil.rmtree(os.environ["BENCH_RECORD_DIR"], ignore_errors=True)
    print(
        "handler thread CPU µs/job:",
        " ".join(f"{x:.1f}" for x in result),
        f"(min {min(result):.1f})",
    )
