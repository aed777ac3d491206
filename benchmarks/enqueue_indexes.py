"""What each secondary index of ultimate_jobs_job costs job_enqueue, on the server.

    DATABASE_URL=postgres://... python -m benchmarks.enqueue_indexes [ROUNDS]

Per variant (no index dropped, each one dropped, all dropped), in ONE transaction
that is rolled back (the indexes come back, nothing is written): 20 job_enqueue
statements of 1,000 no-op rows, timed without the commit. Median over ROUNDS (9)
rounds, the variants interleaved. DROP INDEX locks the table: use your own database.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
os.environ.setdefault("DEBUG", "false")

import django

SECONDARY = (
    "ultimate_jobs_job_correlation",
    "ultimate_jobs_job_key",
    "ultimate_jobs_job_live_key",
    "ultimate_jobs_job_name_age",
    "ultimate_jobs_job_ready",
    "ultimate_jobs_job_state_age",
    "ultimate_jobs_job_tenant",
)


def main(rounds: int) -> None:
    django.setup()
    import psycopg
    from django.core.management import call_command

    from ultimate_jobs import NO_TENANT, Run, job
    from ultimate_jobs.db import DirectDatabase
    from ultimate_jobs.enqueue.rows import array_params, build_rows
    from ultimate_jobs.sql import QUERIES

    call_command("migrate", verbosity=0)

    @job(
        name="bench_enqueue_indexes",
        idempotency_key=lambda p: f"noop:{p['n']}",
        tenant=NO_TENANT,
        queue="bench_enqueue",
    )
    def noop(run: Run, n: int) -> None:
        pass

    conn = DirectDatabase("default").connect()
    conn.autocommit = False
    query = QUERIES["job_enqueue"]
    variants: list[tuple[str, tuple[str, ...]]] = [("none", ())]
    variants += [(name, (name,)) for name in SECONDARY]
    variants.append(("all", SECONDARY))
    times: dict[str, list[float]] = {label: [] for label, _ in variants}
    serial = 0
    for _ in range(rounds):
        for label, dropped in variants:
            batches = []
            for _ in range(20):
                rows = build_rows(noop, [{"n": serial + i} for i in range(1_000)])
                serial += 1_000
                params = {"now": None, **array_params(rows)}
                batches.append(query.positional(params))
            with psycopg.RawCursor(conn) as cursor:
                for name in dropped:
                    cursor.execute(f"DROP INDEX {name}")
                start = time.perf_counter()
                for batch in batches:
                    cursor.execute(query.native, batch)
                times[label].append(time.perf_counter() - start)
            conn.rollback()
    base = statistics.median(times["none"])
    for label, measured in times.items():
        median = statistics.median(measured)
        print(
            f"{label:32s} {median * 1000:7.1f} ms per 20,000 rows "
            f"({20_000 / median:8,.0f} rows/s), dropping it saves "
            f"{(base - median) * 1000 / 20:5.2f} ms per 1,000 rows"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
