"""CPU per 1,000 rows of one system's bulk enqueue: the client's and the server's.

    DATABASE_URL=postgres://.../bench_uj python -m benchmarks.enqueue_cpu uj [COUNT [START [BATCH]]]
    DATABASE_URL=postgres://.../bench_pgqueuer python -m benchmarks.enqueue_cpu pgqueuer

BATCH 1 enqueues one by one (``enqueue``, the harness's single scenario) instead.

The wall clock of an enqueue on a busy machine is mostly the load's; CPU time is not.
After one warm call, COUNT (20,000) rows go in calls of 1,000 (the harness's bulk
scenario, benchmarks/driver.py). Client: this process's CPU time. Server: the CPU
(utime + stime, from /proc) of every backend connected to DATABASE_URL's database,
read by a second connection before and after, so the server must run on this machine
and this process must be allowed to read its processes' /proc entries (root, or the
server's user). The database must be set up and empty (the harness's setup and reset,
benchmarks/systems/). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import psycopg

TICK = os.sysconf("SC_CLK_TCK")
BATCH = 1_000


def backend_cpu(monitor: psycopg.Connection[Any], database: str) -> float:
    """The CPU seconds every other backend of ``database`` has used so far."""
    pids = [
        row[0]
        for row in monitor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
    ]
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the backend ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / TICK


def main(system: str, count: int, start: int, batch: int = BATCH) -> dict[str, Any]:
    if system == "uj":
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
        from benchmarks.systems.uj import UltimateJobsClient as Client
    elif system == "pgqueuer":
        from benchmarks.systems.pgqueuer_ import PgQueuerClient as Client  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown system {system!r} (uj or pgqueuer)")
    dsn = os.environ["DATABASE_URL"]
    database = dsn.rsplit("/", 1)[1].split("?", 1)[0]
    client = Client()
    client.open()
    try:
        with psycopg.connect(dsn, autocommit=True) as monitor:
            client.enqueue_many([start - 1])  # warm: connection, imports, prepared plan
            numbers = list(range(start, start + count))
            server = backend_cpu(monitor, database)
            cpu, wall = time.process_time(), time.perf_counter()
            if batch == 1:
                for n in numbers:
                    client.enqueue(n)
            else:
                for i in range(0, count, batch):
                    client.enqueue_many(numbers[i : i + batch])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            server = backend_cpu(monitor, database) - server
    finally:
        client.close()
    per = 1_000 * 1_000 / count  # ms per 1,000 rows, from seconds per COUNT rows
    return {
        "system": system,
        "batch": batch,
        "wall_ms": round(wall * per, 2),
        "client_cpu_ms": round(cpu * per, 2),
        "server_cpu_ms": round(server * per, 2),
        "load": os.getloadavg()[0],
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    print(
        json.dumps(
            main(
                args[0],
                int(args[1]) if len(args) > 1 else 20_000,
                int(args[2]) if len(args) > 2 else 1,
                int(args[3]) if len(args) > 3 else BATCH,
            )
        )
    )
