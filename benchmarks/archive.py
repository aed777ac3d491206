"""The hot table with and without the partitioned archive (Q2), as jobs pour through.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB \\
        .venv/bin/python -m benchmarks.archive --jobs 10000000 --at 1000000,5000000

Pushes ``--jobs`` no-op jobs through the engine's own named statements from one tight
driver, with no worker process and no Python job body: each cycle enqueues ``--cycle``
jobs (``job_enqueue``, the rows ``enqueue_many`` builds), claims them all
(``job_claim_plain``, ``--claim`` rows a statement, as a worker does) and settles them
done (``job_complete``, the batched ack). With the mover (the default) every cycle then
runs the archive mover as the scheduler leader does (``maintenance/archive.move``, with
``ARCHIVE_AFTER`` from the settings or ``--after``, batches of ``--move-batch``); ``--no-mover``
leaves every finished row in the hot table, as before Q2. Autovacuum runs as the
server is configured.

At each checkpoint (``--at``, and the end) it reports: the hot table's total size
(``pg_total_relation_size``: heap, indexes, TOAST) and its live and dead tuples and
autovacuum runs (``pg_stat_user_tables``); the archive's total size over every day;
the claim's time, the median and the slowest of ``--samples`` claims of 10 rows (wall
time of the statement from this process, a round trip included) with ``--backlog``
ready jobs waiting; and the time of a plain ``VACUUM`` of the hot table. Checkpoints are
printed as they come (a run stopped early still has its figures) and, at the end, as
a Markdown table.

Use a database of its own: the job tables are emptied at the start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
os.environ.setdefault("DEBUG", "false")  # no query log: the prepared, native path

import django

QUEUE = "bench_archive"
NAME = "bench_archive_noop"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.archive")
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument(
        "--at",
        default="1000000,5000000",
        help="checkpoints (jobs done), comma-separated",
    )
    parser.add_argument("--cycle", type=int, default=20_000, help="jobs per cycle")
    parser.add_argument("--claim", type=int, default=1_000, help="rows per claim")
    parser.add_argument("--move-batch", type=int, default=5_000)
    parser.add_argument(
        "--after", type=float, default=None, help="ARCHIVE_AFTER, s (default: setting)"
    )
    parser.add_argument("--samples", type=int, default=50, help="claims timed")
    parser.add_argument("--backlog", type=int, default=10_000, help="ready while timed")
    parser.add_argument("--no-mover", action="store_true")
    args = parser.parse_args(argv)
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    bench = Bench(args)
    bench.reset()
    checkpoints = sorted({int(n) for n in args.at.split(",") if n} | {args.jobs})
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for checkpoint in checkpoints:
        while bench.done < checkpoint:
            bench.cycle(min(args.cycle, checkpoint - bench.done))
        row = bench.measure()
        row["elapsed_s"] = time.monotonic() - started
        rows.append(row)
        print(describe(row), flush=True)
    print(table(rows, mover=not args.no_mover, after=bench.after))
    return 0


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        from ultimate_jobs import NO_TENANT, Run, job
        from ultimate_jobs.conf import get_settings
        from ultimate_jobs.db import DirectDatabase

        @job(
            name=NAME,
            idempotency_key=lambda p: f"h:{p['n']}",
            tenant=NO_TENANT,
            queue=QUEUE,
        )
        def noop(run: Run, n: int) -> None:
            """Never run: the driver settles the rows itself."""

        self.handle = noop
        self.args = args
        self.settings = get_settings()
        self.db = DirectDatabase("default", application_name="bench archive")
        self.worker_id = f"bench-{uuid.uuid4().hex[:6]}"
        self.done = 0  # jobs settled done
        self.pending = 0  # enqueued, not settled yet
        self.moved = 0
        self.after = (
            self.settings.ARCHIVE_AFTER if args.after is None else float(args.after)
        )

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        """An ad-hoc statement of the benchmark (sizes, VACUUM), autocommit."""
        conn = self.db.connect()
        with conn.cursor() as cursor:
            cursor.execute(text)
            return list(cursor.fetchall()) if cursor.description else []

    def reset(self) -> None:
        self.sql(
            "TRUNCATE ultimate_jobs_job, ultimate_jobs_job_archive, ultimate_jobs_step,"
            " ultimate_jobs_attempt, ultimate_jobs_run_log, ultimate_jobs_counter CASCADE"
        )
        self.sql("SELECT pg_stat_reset()")
        self.sql("VACUUM ANALYZE ultimate_jobs_job")

    def enqueue(self, count: int) -> None:
        from ultimate_jobs.enqueue.rows import array_params, build_rows
        from ultimate_jobs.sql import QUERIES

        first = self.done + self.pending
        rows = build_rows(self.handle, [{"n": first + i} for i in range(count)])
        self.db.run(QUERIES["job_enqueue"], now=None, **array_params(rows))
        self.pending += count

    def claim(self, limit: int) -> list[dict[str, Any]]:
        from ultimate_jobs.sql import QUERIES

        return self.db.run(
            QUERIES["job_claim_plain"],
            queues=[QUEUE],
            names=[NAME],
            limit=limit,
            lease_seconds=self.settings.LEASE,
            worker_id=self.worker_id,
            now=None,
        )

    def complete(self, claimed: list[dict[str, Any]]) -> None:
        from ultimate_jobs.sql import QUERIES

        self.db.run(
            QUERIES["job_complete"],
            ids=[row["id"] for row in claimed],
            lease_owners=[row["lease_owner"] for row in claimed],
            progresses=[None] * len(claimed),
            now=None,
        )

    def move(self) -> None:
        from ultimate_jobs.maintenance import archive

        while True:
            done = archive.move(
                self.db,
                after=self.after,
                batch=self.args.move_batch,
                max_batches=100,
            )
            self.moved += done.moved
            if not done.full:
                return

    def cycle(self, count: int) -> None:
        self.enqueue(count)
        while self.pending:
            claimed = self.claim(min(self.args.claim, self.pending))
            if not claimed:
                raise RuntimeError(f"{self.pending} enqueued jobs could not be claimed")
            self.complete(claimed)
            self.pending -= len(claimed)
            self.done += len(claimed)
        if not self.args.no_mover:
            self.move()

    def measure(self) -> dict[str, Any]:
        self.enqueue(self.args.backlog)
        times = []
        for _ in range(self.args.samples):
            started = time.perf_counter()
            claimed = self.claim(10)
            times.append((time.perf_counter() - started) * 1000)
            self.complete(claimed)
            self.pending -= len(claimed)
            self.done += len(claimed)
        while self.pending:  # the rest of the backlog, as a cycle would
            claimed = self.claim(min(self.args.claim, self.pending))
            self.complete(claimed)
            self.pending -= len(claimed)
            self.done += len(claimed)
        [(hot, live, dead, autovacuums)] = self.sql(
            "SELECT pg_total_relation_size('ultimate_jobs_job'), n_live_tup,"
            " n_dead_tup, autovacuum_count FROM pg_stat_user_tables"
            " WHERE relname = 'ultimate_jobs_job'"
        )
        [(archive_bytes, days)] = self.sql(
            "SELECT coalesce(sum(pg_total_relation_size(relid)), 0), count(*)"
            " FILTER (WHERE isleaf)"
            " FROM pg_partition_tree('ultimate_jobs_job_archive')"
        )
        [(hot_rows,)] = self.sql("SELECT count(*) FROM ultimate_jobs_job")
        started = time.perf_counter()
        self.sql("VACUUM ultimate_jobs_job")
        vacuum_s = time.perf_counter() - started
        return {
            "done": self.done,
            "hot_rows": hot_rows,
            "hot_bytes": hot,
            "live": live,
            "dead": dead,
            "autovacuums": autovacuums,
            "archive_bytes": archive_bytes,
            "days": days,
            "moved": self.moved,
            "claim_median_ms": statistics.median(times),
            "claim_max_ms": max(times),
            "vacuum_s": vacuum_s,
        }


def mib(value: int) -> str:
    return f"{value / 2**20:,.0f} MiB"


def describe(row: dict[str, Any]) -> str:
    return (
        f"{row['done']:,} jobs done after {row['elapsed_s']:.0f} s: hot table "
        f"{row['hot_rows']:,} rows, {mib(row['hot_bytes'])} (dead tuples "
        f"{row['dead']:,}, autovacuum runs {row['autovacuums']}); archive "
        f"{row['moved']:,} moved, {mib(row['archive_bytes'])} over {row['days']} "
        f"days; claim of 10 median {row['claim_median_ms']:.2f} ms, slowest "
        f"{row['claim_max_ms']:.2f} ms; VACUUM of the hot table {row['vacuum_s']:.2f} s"
    )


def table(rows: list[dict[str, Any]], *, mover: bool, after: float) -> str:
    lines = [
        "",
        f"the archive mover: {f'on, ARCHIVE_AFTER {after:g} s' if mover else 'off'}",
        "",
        "| jobs done | hot rows | hot table | dead tuples | autovacuums | archive "
        "| claim median | claim slowest | VACUUM hot |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['done']:,} | {row['hot_rows']:,} | {mib(row['hot_bytes'])} "
            f"| {row['dead']:,} | {row['autovacuums']} | {mib(row['archive_bytes'])} "
            f"| {row['claim_median_ms']:.2f} ms | {row['claim_max_ms']:.2f} ms "
            f"| {row['vacuum_s']:.2f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
