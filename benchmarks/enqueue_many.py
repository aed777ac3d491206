"""Time enqueue_many alone: 20 calls of 1,000 no-op rows, median of 3 rounds.

    DATABASE_URL=postgres://... python -m benchmarks.enqueue_many [--profile]

DEBUG is off, as in production (under DEBUG Django logs every query and the statement
takes its client-side path). Prints jobs/s (wall clock) and the client's CPU time per
round; the queue is emptied before each round so every round inserts into the same
table size.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
os.environ.setdefault("DEBUG", "false")  # no query log: the prepared, native path

import django

CALLS = 20
PER_CALL = 1_000
ROUNDS = 3


def main() -> None:
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from ultimate_jobs import NO_TENANT, Run, job

    call_command("migrate", verbosity=0)

    @job(
        name="bench_enqueue_noop",
        idempotency_key=lambda p: f"noop:{p['n']}",
        tenant=NO_TENANT,
        queue="bench_enqueue",
    )
    def noop(run: Run, n: int) -> None:
        pass

    def clear() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM ultimate_jobs_job WHERE queue = 'bench_enqueue'"
            )
            cursor.execute("VACUUM ANALYZE ultimate_jobs_job")

    clear()
    noop.enqueue_many([{"n": -1}])  # warm-up: imports, prepared statement
    rates, cpus = [], []
    for round_ in range(ROUNDS):
        clear()
        batches = [
            [{"n": round_ * 10**7 + call * PER_CALL + i} for i in range(PER_CALL)]
            for call in range(CALLS)
        ]
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            noop.enqueue_many(batch)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rates.append(CALLS * PER_CALL / wall)
        cpus.append(cpu)
        print(
            f"round {round_ + 1}: {rates[-1]:,.0f} jobs/s, wall {wall:.3f} s, "
            f"client CPU {cpu:.3f} s",
            flush=True,
        )
    print(
        f"median: {statistics.median(rates):,.0f} jobs/s, client CPU "
        f"{statistics.median(cpus):.3f} s per {CALLS * PER_CALL:,} jobs"
    )
    clear()


if __name__ == "__main__":
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(main)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    else:
        main()
