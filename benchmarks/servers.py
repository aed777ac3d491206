"""One deployment over several PostgreSQL servers, simulated on this machine (Q1, Q3).

    python -m benchmarks.servers [--servers 3] [--jobs 30000] [--workers 3]
                                 [--concurrency 16] [--lease 10] [--json FILE]

Starts ``--servers`` private PostgreSQL servers on private ports (fsync off, like the
other private-server benchmarks) and runs the same work in two layouts, each on fresh
databases migrated with ``migrate --database`` per alias:

* ``spread``: queue ``simI`` routed to server I (``QUEUES``' mapping form); every worker
  process serves every queue, so it runs a claim loop and a LISTEN per server under one
  slot budget;
* ``dedicated``: routed as ``spread``, but worker process I serves only queue
  ``sim<I mod servers>`` (``--queues``), so no process splits its slots over servers;
* ``one``: every queue on the first server, the baseline.

In each layout ``--jobs`` no-op jobs are enqueued evenly over the queues with
``enqueue_many`` (routing splits each call by server), ``--workers`` worker processes
start, the first is killed with SIGKILL a third of the way through and a replacement
started, and the run waits until every job ran and settled. It then checks from the
servers and from the bodies' own records (benchmarks/record.py): no job lost, none
stuck, every job that ran twice explained by a lapsed lease (its row's attempt is at
least its number of runs), and every queue's rows on its own server only.

Wall-clock rates on a shared 2-core machine are what this machine gives; the servers'
transactions per job do not move with the load (docs/scaling.md reads them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import psycopg

from benchmarks.idle import PrivateServer
from benchmarks.record import ENV as RECORD_ENV
from benchmarks.record import Records
from benchmarks.systems.base import MANAGE, REPO

SETTINGS = "benchmarks.settings_servers"
LAYOUTS = ("spread", "dedicated", "one")
CHUNK = 1_000
DONE_STATES = ("done",)


@dataclass
class Outcome:
    layout: str
    servers: int
    workers: int
    jobs: int
    enqueue_per_s: float = 0.0
    drain_per_s: float = 0.0
    lost: int = 0
    stuck: int = 0
    ran_twice: int = 0
    explained: int = 0
    misrouted: int = 0
    jobs_per_server: list[int] = field(default_factory=list)
    xacts_per_job: float = 0.0  # every server's transactions over the drain, per job
    xacts_share: list[float] = field(default_factory=list)  # each server's part of them

    @property
    def passed(self) -> bool:
        return (
            self.lost == 0
            and self.stuck == 0
            and self.misrouted == 0
            and self.ran_twice == self.explained
        )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.servers")
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--lease", type=float, default=10.0, help="LEASE (seconds)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--json", help="also write the outcomes here")
    parser.add_argument(
        "--driver", choices=("migrate", "enqueue"), help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


# --- the app side: runs in a process of its own with the layout's settings ---------------


def driver(command: str, jobs: int) -> None:
    import django

    django.setup()
    if command == "migrate":
        from django.conf import settings
        from django.core.management import call_command

        for alias in settings.DATABASES:
            call_command("migrate", database=alias, verbosity=0, interactive=False)
        return
    from benchmarks.serversapp.jobs import HANDLES

    started = time.perf_counter()
    for start in range(0, jobs, CHUNK * len(HANDLES)):
        for index, handle in enumerate(HANDLES):
            first = start + index * CHUNK
            numbers = range(first, min(first + CHUNK, jobs))
            if numbers:
                handle.enqueue_many([{"n": n} for n in numbers])
    print(json.dumps({"seconds": time.perf_counter() - started}))


# --- the orchestrator ---------------------------------------------------------------------


def queue_of(n: int, queues: int) -> int:
    """The queue ``driver`` put job ``n`` in: chunks of CHUNK go round the queues."""
    return (n // CHUNK) % queues


class Layout:
    def __init__(
        self, name: str, servers: list[PrivateServer], args: argparse.Namespace
    ) -> None:
        self.name = name
        self.args = args
        self.dsns = [server.create(f"sim_{name}") for server in servers]
        self.dir = tempfile.mkdtemp(prefix=f"uj-sim-{name}-")
        self.records = os.path.join(self.dir, "records")
        os.mkdir(self.records)
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "SIM_SERVERS": ",".join(self.dsns),
            "SIM_LAYOUT": "one" if name == "one" else "spread",
            "SIM_LEASE": str(args.lease),
            RECORD_ENV: self.records,
            "PYTHONPATH": str(REPO),
        }
        self.workers: list[subprocess.Popen[bytes]] = []
        self.log = open(os.path.join(self.dir, "workers.log"), "ab")

    def app(self, command: str) -> str:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.servers",
                "--driver",
                command,
                "--jobs",
                str(self.args.jobs),
            ],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(f"{command} failed ({self.name}):\n{done.stderr}")
        return done.stdout

    def start_worker(self, index: int) -> None:
        argv = [
            sys.executable,
            MANAGE,
            "jobs_worker",
            "--concurrency",
            str(self.args.concurrency),
        ]
        if self.name == "dedicated":
            argv += ["--queues", f"sim{index % len(self.dsns)}"]
        self.workers.append(
            subprocess.Popen(
                argv,
                env=self.env,
                cwd=REPO,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def stop_workers(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=60 + self.args.lease)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()

    def xacts(self) -> list[int]:
        counts = []
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database"
                    " WHERE datname = current_database()"
                ).fetchone()
                counts.append(int(row[0]) if row else 0)
        return counts

    def rows(self) -> list[list[tuple[str, str, int, int]]]:
        """(queue, state, n, attempt) of every job, per server, hot table and the archive."""
        found = []
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                tables = ["ultimate_jobs_job"]
                archive = conn.execute(
                    "SELECT to_regclass('ultimate_jobs_job_archive') IS NOT NULL"
                ).fetchone()
                if archive and archive[0]:
                    tables.append("ultimate_jobs_job_archive")
                union = " UNION ALL ".join(
                    f"SELECT queue, state, (input->>'n')::int, attempt FROM {table}"
                    for table in tables
                )
                found.append(list(conn.execute(union).fetchall()))  # type: ignore[call-overload]
        return found

    def settled(self) -> bool:
        for rows in self.rows():
            if any(state not in DONE_STATES for _, state, _, _ in rows):
                return False
        return sum(len(rows) for rows in self.rows()) >= self.args.jobs

    def run(self) -> Outcome:
        args = self.args
        self.app("migrate")
        enqueue_seconds = json.loads(self.app("enqueue"))["seconds"]
        outcome = Outcome(self.name, len(self.dsns), args.workers, args.jobs)
        outcome.enqueue_per_s = args.jobs / enqueue_seconds
        before = self.xacts()
        records = Records(self.records)
        for index in range(args.workers):
            self.start_worker(index)
        # Deadline: the drain at a floor of 20 jobs/s, plus the killed worker's lease.
        deadline = time.monotonic() + args.jobs / 20 + 4 * args.lease + 120
        killed = False
        try:
            while len({n for n, _ in records.items}) < args.jobs:
                records.poll()
                if not killed and len(records.items) >= args.jobs // 3:
                    os.killpg(self.workers[0].pid, signal.SIGKILL)
                    self.workers[0].wait()
                    self.start_worker(0)
                    killed = True
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            while not self.settled() and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            self.stop_workers()
        records.poll()
        after = self.xacts()
        self.check(outcome, records.items)
        ran = [t for _, t in records.items]
        if len(ran) > 1:
            outcome.drain_per_s = len({n for n, _ in records.items}) / (
                (max(ran) - min(ran)) / 1e9
            )
        spent = [a - b for a, b in zip(after, before, strict=True)]
        outcome.xacts_per_job = round(sum(spent) / args.jobs, 2)
        outcome.xacts_share = [round(x / max(1, sum(spent)), 2) for x in spent]
        return outcome

    def check(self, outcome: Outcome, items: list[tuple[int, int]]) -> None:
        runs = Counter(n for n, _ in items)
        queues = len(self.dsns)
        attempts: dict[int, int] = {}
        for server, rows in enumerate(self.rows()):
            outcome.jobs_per_server.append(len(rows))
            for queue, state, n, attempt in rows:
                attempts[n] = attempt
                if state not in DONE_STATES:
                    outcome.stuck += 1
                expected = queue_of(n, queues) if self.name != "one" else 0
                if server != expected or queue != f"sim{queue_of(n, queues)}":
                    outcome.misrouted += 1
        outcome.lost = sum(1 for n in range(self.args.jobs) if runs[n] == 0)
        twice = [n for n, count in runs.items() if count > 1]
        outcome.ran_twice = len(twice)
        outcome.explained = sum(1 for n in twice if attempts.get(n, 0) >= runs[n])

    def close(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| layout | servers | workers | jobs | enqueue_many (jobs/s) | drain (jobs/s)"
        " | jobs per server | transactions per job (share per server) | lost | stuck"
        " | ran twice (explained) | misrouted | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.layout} | {o.servers} | {o.workers} | {o.jobs:,}"
            f" | {o.enqueue_per_s:,.0f} | {o.drain_per_s:,.0f}"
            f" | {' / '.join(f'{j:,}' for j in o.jobs_per_server)}"
            f" | {o.xacts_per_job} ({' / '.join(str(x) for x in o.xacts_share)})"
            f" | {o.lost} | {o.stuck} | {o.ran_twice} ({o.explained})"
            f" | {o.misrouted} | {'PASS' if o.passed else 'FAIL'} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.driver:
        driver(args.driver, args.jobs)
        return 0
    servers = [PrivateServer(settings={}) for _ in range(args.servers)]
    missing = servers[0].available()
    if missing:
        print(f"skipped: {missing}", file=sys.stderr)
        return 2
    outcomes = []
    try:
        for server in servers:
            server.start()
        ports = ", ".join(str(server.port) for server in servers)
        print(f"{args.servers} private servers on ports {ports}", file=sys.stderr)
        for name in args.layouts.split(","):
            layout = Layout(name, servers, args)
            try:
                outcomes.append(layout.run())
            finally:
                layout.close()
            print(table(outcomes[-1:]), file=sys.stderr)
    finally:
        for server in servers:
            server.stop()
    print(table(outcomes))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([asdict(o) for o in outcomes], handle, indent=1)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
