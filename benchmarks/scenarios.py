"""The scenarios, each run against one system at a time (the caller interleaves them).

Every scenario starts from an empty queue (``System.reset``) and a fresh record
directory; workers are real processes started the way each system's docs say.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from benchmarks.procs import Group
from benchmarks.record import Records
from benchmarks.stats import percentile
from benchmarks.systems.base import REPO, System

MIB = 1024 * 1024


@dataclass
class Context:
    run_dir: str
    drain_jobs: int = 20_000
    drain_cap: float = 120.0
    single_jobs: int = 2_000
    bulk_jobs: int = 20_000
    bulk_batch: int = 1_000
    pickup_jobs: int = 200
    pickup_gap: float = 0.02
    pickup_concurrency: int = 4

    def records(self, system: System, label: str) -> str:
        path = os.path.join(self.run_dir, "records", f"{system.name}-{label}")
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def log(self, system: System, label: str) -> str:
        os.makedirs(os.path.join(self.run_dir, "logs"), exist_ok=True)
        return os.path.join(self.run_dir, "logs", f"{system.name}-{label}.log")


def start_worker(
    ctx: Context,
    system: System,
    concurrency: int,
    record_dir: str,
    label: str,
    argvs: list[list[str]] | None = None,
    processes: int = 1,
) -> Group:
    argvs = argvs or system.worker(concurrency, processes=processes)
    env = system.env(record_dir, **system.worker_env(concurrency))
    os.chdir(REPO)
    return Group(argvs, env, ctx.log(system, label))


def wait_for(
    records: Records, count: int, deadline: float, group: Group | None = None
) -> int:
    seen = records.poll()
    while seen < count and time.monotonic() < deadline:
        if group is not None and not group.alive():
            break
        time.sleep(0.05)
        seen = records.poll()
    return seen


# -- enqueue -----------------------------------------------------------------------


def enqueue_single(ctx: Context, system: System) -> dict[str, Any]:
    system.reset()
    answer = system.driver("single", ctx.single_jobs, 1)
    system.reset()
    return {"rate": ctx.single_jobs / answer["seconds"]}


def enqueue_bulk(ctx: Context, system: System) -> dict[str, Any]:
    if not system.bulk:
        return {"skipped": "no bulk enqueue API"}
    system.reset()
    answer = system.driver("bulk", ctx.bulk_jobs, 1, ctx.bulk_batch)
    system.reset()
    return {"rate": ctx.bulk_jobs / answer["seconds"]}


# -- drain -------------------------------------------------------------------------


def drain(
    ctx: Context, system: System, concurrency: int, processes: int = 1
) -> dict[str, Any]:
    """Fill N no-op jobs, start a worker, measure until every job ran (or the cap)."""
    label = f"drain-c{concurrency}-p{processes}"
    system.reset()
    record_dir = ctx.records(system, label)
    system.driver("fill", ctx.drain_jobs, 1)
    group = start_worker(
        ctx, system, concurrency, record_dir, label, processes=processes
    )
    group.start_sampling()
    records = Records(record_dir)
    cpu: dict[str, Any] = {}
    try:
        # CPU per job is counted from the first job run to the last, so the worker's
        # start (imports, checks) is not charged to the jobs: a figure that holds on a
        # busy machine, unlike jobs/s.
        deadline = time.monotonic() + ctx.drain_cap
        first = wait_for(records, 1, deadline, group)
        cpu_first = group.cpu_seconds()
        xacts_first = transactions(system)
        last = wait_for(records, ctx.drain_jobs, deadline, group)
        if last > first:
            cpu["cpu_us_per_job"] = (
                (group.cpu_seconds() - cpu_first) / (last - first) * 1e6
            )
            # Transactions per job, from pg_stat_database of the system's own
            # database (an autocommit statement is one; PostgreSQL publishes a busy
            # session's counts at most a second late, so short drains read low).
            time.sleep(1.1)
            cpu["xacts_per_job"] = (transactions(system) - xacts_first - 1) / (
                last - first
            )
    finally:
        group.stop()
    records.poll()
    system.reset()
    return (
        analyse_drain(records.items, ctx.drain_jobs)
        | {"peak_rss_mib": group.peak_rss / MIB}
        | cpu
    )


def transactions(system: System) -> int:
    """Committed and rolled back transactions of the system's database so far."""
    with psycopg.connect(system.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def analyse_drain(items: list[tuple[int, int]], expected: int) -> dict[str, Any]:
    counts = Counter(n for n, _ in items)
    duplicates = sum(1 for c in counts.values() if c > 1)
    ran = sum(1 for n in range(1, expected + 1) if n in counts)
    if len(items) < 2:
        return {"rate": None, "ran": ran, "duplicates": duplicates, "complete": False}
    times = [t for _, t in items]
    span = (max(times) - min(times)) / 1e9
    return {
        "rate": (len(items) - 1) / span if span > 0 else None,
        "ran": ran,
        "duplicates": duplicates,
        "complete": ran == expected and duplicates == 0,
    }


# -- pickup ------------------------------------------------------------------------


def pickup(ctx: Context, system: System, outbox: bool = False) -> dict[str, Any]:
    """An idle worker; jobs enqueued from another process 20 ms apart (commit to start)."""
    label = "pickup-outbox" if outbox else "pickup"
    argvs = None
    if outbox:
        missing = system.outbox()  # type: ignore[attr-defined]
        if missing:
            return {"skipped": missing}
        argvs = system.worker_with_relay(ctx.pickup_concurrency)  # type: ignore[attr-defined]
    system.reset()
    record_dir = ctx.records(system, label)
    group = start_worker(
        ctx, system, ctx.pickup_concurrency, record_dir, label, argvs=argvs
    )
    records = Records(record_dir)
    mode = ["outbox"] if outbox else []
    try:
        # warm up: the worker is up and has run one job; then let it go idle
        system.driver("pickup", 1, -1, 0, *mode, record_dir=record_dir)
        if wait_for(records, 1, time.monotonic() + 60, group) < 1:
            return {"skipped": "the worker ran no warm-up job in 60 s"}
        time.sleep(3)
        answer = system.driver(
            "pickup", ctx.pickup_jobs, 1, ctx.pickup_gap, *mode, record_dir=record_dir
        )
        wait_for(records, ctx.pickup_jobs + 1, time.monotonic() + 30, group)
    finally:
        group.stop()
    system.reset()
    started = {n: t for n, t in records.items if n >= 1}
    committed = {int(n): t for n, t in answer["committed"].items()}
    latencies = [(started[n] - committed[n]) / 1e6 for n in committed if n in started]
    if not latencies:
        return {"skipped": "no job started"}
    stages = {}
    if os.environ.get("BENCH_TRACE") == "1":  # benchmarks/trace.py
        from benchmarks import trace

        stages = {
            f"{stage}_p{q}": percentile(values, q)
            for stage, values in trace.stages(record_dir, committed, started).items()
            if values
            for q in (50, 99)
        }
    return {
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "p99": percentile(latencies, 99),
        "max": max(latencies),
        "started": len(latencies),
    } | stages


# -- a million jobs (opt-in) -------------------------------------------------------


def million(
    ctx: Context, system: System, jobs: int, concurrency: int = 16, cap: float = 3600
) -> dict[str, Any]:
    """Drain JOBS jobs, sampling RSS against the number of jobs run so far.

    Every sample is also appended to ``million.tsv`` in the run directory as it is
    taken, so an interrupted or capped run keeps what it measured.
    """
    label = f"million-c{concurrency}"
    system.reset()
    record_dir = ctx.records(system, label)
    filled = time.monotonic()
    system.driver("fill", jobs, 1)
    fill_seconds = time.monotonic() - filled
    group = start_worker(ctx, system, concurrency, record_dir, label)
    records = Records(record_dir)
    samples: list[tuple[int, float]] = []
    step = max(1, jobs // 20)
    next_mark = step
    began = time.monotonic()
    tsv = os.path.join(ctx.run_dir, "million.tsv")
    with open(tsv, "a") as out:
        out.write(
            f"# fill of {jobs} jobs took {fill_seconds:.0f}s\njobs\trss_mib\tseconds\n"
        )
    try:
        while True:
            seen = records.poll()
            if seen >= next_mark or seen >= jobs:
                rss = group.rss() / MIB
                samples.append((seen, rss))
                with open(tsv, "a") as out:
                    out.write(f"{seen}\t{rss:.1f}\t{time.monotonic() - began:.0f}\n")
                next_mark = (seen // step + 1) * step
            if seen >= jobs or not group.alive() or time.monotonic() - began > cap:
                break
            time.sleep(0.5)
    finally:
        group.stop()
    result = analyse_drain(records.items, jobs)
    system.reset()
    return result | {
        "samples": samples,
        "fill_seconds": fill_seconds,
        "capped": len(records.items) < jobs,
    }
