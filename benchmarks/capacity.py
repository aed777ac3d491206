"""The capacity model's inputs (docs/scaling.md, issue 18 item 4), measured.

    python -m benchmarks.capacity [--jobs 5000] [--idle-seconds 60] [--json FILE]

Starts a PRIVATE PostgreSQL from the installed binaries with
``shared_preload_libraries = pg_stat_statements`` (the shared server has no such
library loaded), one database per scenario, and measures with counts that do not move
with the machine's load (the machine is shared: 2 cores, other test runs):

* idle: statements per minute per worker process (pg_stat_statements ``calls`` of its
  database over a window, after a warm-up), for the default process and for poll-only
  processes (``WAKE=False``, as behind PgBouncer) at several ``IDLE_POLL_MAX``; the CPU
  seconds of the worker and of its server backends are reported too (CPU time, not
  wall time, but a loaded machine still inflates it a little);
* connections per worker process: the server backends whose client port is one of the
  process's sockets, by ``application_name``, idle and at most while draining;
* per job: statements, rows, WAL bytes and server CPU per job for draining a backlog of
  no-op jobs with one worker process, and per enqueued job for ``enqueue`` one by one
  and ``enqueue_many``.

Wall-clock rates are not measured here (see docs/benchmarks.md for those).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psutil
import psycopg

from benchmarks.idle import PrivateServer, _free_port
from benchmarks.procs import Group
from benchmarks.record import Records
from benchmarks.systems.base import REPO
from benchmarks.systems.uj import UltimateJobs

SERVER_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",  # what clients send, not what functions run
    "pg_stat_statements.max": "10000",
    # Planning is timed apart from execution: a statement planned at every call (no
    # prepared statements, or a custom plan) costs far more to plan than to run.
    "pg_stat_statements.track_planning": "on",
    "max_connections": "300",
}
STATS = """
SELECT d.datname AS database,
       coalesce(sum(s.calls), 0)::bigint AS calls,
       coalesce(sum(s.rows), 0)::bigint AS rows,
       coalesce(sum(s.wal_bytes), 0)::bigint AS wal_bytes,
       coalesce(sum(s.total_exec_time), 0)::float AS exec_ms,
       coalesce(sum(s.total_plan_time), 0)::float AS plan_ms
FROM pg_stat_statements AS s
JOIN pg_database AS d ON d.oid = s.dbid
GROUP BY d.datname
"""
TOP = """
SELECT s.calls::bigint, s.rows::bigint, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 70)
FROM pg_stat_statements AS s
JOIN pg_database AS d ON d.oid = s.dbid
WHERE d.datname = %s
ORDER BY s.calls DESC
LIMIT 12
"""


@dataclass(frozen=True)
class Idle:
    """One idle worker process: its label, its command line options, its variables;
    ``bouncer``: it reaches the server through PgBouncer when one is installed."""

    label: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    bouncer: bool = False
    # One application_name for every connection (DATABASE_URL ?application_name=):
    # PgBouncer then has no name to SET when a server session changes clients.
    one_name: bool = False


POLL_ONLY = (
    ("ULTIMATE_JOBS_WAKE", "false"),
    ("ULTIMATE_JOBS_PREPARED_STATEMENTS", "false"),
)
IDLE = [
    Idle("default (worker, scheduler, relay; WAKE on)"),
    Idle("worker role only, WAKE on", ("--roles", "worker")),
    Idle(
        "poll-only, IDLE_POLL_MAX=2s, a name per connection",
        env=(*POLL_ONLY, ("ULTIMATE_JOBS_IDLE_POLL_MAX", "2s")),
        bouncer=True,
    ),
    *(
        Idle(
            f"poll-only, IDLE_POLL_MAX={poll}",
            env=(*POLL_ONLY, ("ULTIMATE_JOBS_IDLE_POLL_MAX", poll)),
            bouncer=True,
            one_name=True,
        )
        for poll in ("1s", "2s", "5s", "10s")
    ),
    Idle(
        "poll-only, IDLE_POLL_MAX=2s, worker role only",
        ("--roles", "worker"),
        (*POLL_ONLY, ("ULTIMATE_JOBS_IDLE_POLL_MAX", "2s")),
        bouncer=True,
        one_name=True,
    ),
    # What PgBouncer 1.21+ with prepared statements would cost: WAKE off, prepared
    # statements on, direct (this PgBouncer, 1.18, cannot hold them).
    Idle(
        "WAKE off, prepared statements on, direct, IDLE_POLL_MAX=2s",
        env=(("ULTIMATE_JOBS_WAKE", "false"), ("ULTIMATE_JOBS_IDLE_POLL_MAX", "2s")),
    ),
    Idle(
        "poll-only, IDLE_POLL_MAX=5s, worker role only",
        ("--roles", "worker"),
        (*POLL_ONLY, ("ULTIMATE_JOBS_IDLE_POLL_MAX", "5s")),
        bouncer=True,
        one_name=True,
    ),
]


class Server(PrivateServer):
    """The private server, with pg_stat_statements and the helpers this script needs."""

    def __init__(self) -> None:
        super().__init__(SERVER_SETTINGS)

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn("postgres"), autocommit=True)

    def prepare(self) -> None:
        with self.admin() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def stats(self) -> dict[str, dict[str, float]]:
        with self.admin() as conn:
            rows = conn.execute(STATS).fetchall()
        return {
            row[0]: {
                "calls": row[1],
                "rows": row[2],
                "wal_bytes": row[3],
                "exec_ms": row[4],
                "plan_ms": row[5],
            }
            for row in rows
        }

    def reset(self) -> None:
        with self.admin() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    def top(self, database: str) -> list[tuple[int, int, str]]:
        with self.admin() as conn:
            return [tuple(row) for row in conn.execute(TOP, [database]).fetchall()]

    def backends(self, database: str) -> dict[int, tuple[int, str]]:
        """Backend pid -> (client port, application_name) of one database's sessions."""
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT pid, coalesce(client_port, -1), application_name"
                " FROM pg_stat_activity WHERE datname = %s",
                [database],
            ).fetchall()
        return {row[0]: (row[1], row[2]) for row in rows}

    def postmaster(self) -> psutil.Process:
        with open(os.path.join(self.data, "postmaster.pid")) as handle:
            return psutil.Process(int(handle.readline()))


class Bouncer:
    """PgBouncer in transaction mode in front of the private server (the deployment
    docs/scaling.md describes; configured like the test suite's PgBouncer leg)."""

    def __init__(
        self,
        server_port: int,
        pool_size: int = 20,
        ignore: str = "extra_float_digits,options",
    ) -> None:
        # psycopg sends `options` (-c jit=off); a pooler cannot honour it per client.
        self.ignore = ignore
        self.binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="uj-bench-bouncer-")
        self.server_port = server_port
        self.pool_size = pool_size

    def available(self) -> str | None:
        if not os.path.exists(self.binary):
            return "pgbouncer is not installed (apt-get install pgbouncer)"
        return None

    def start(self) -> None:
        os.chmod(self.dir, 0o777)  # noqa: S103 - pgbouncer drops root for postgres
        with open(os.path.join(self.dir, "users.txt"), "w") as handle:
            handle.write('"postgres" ""\n')
        config = os.path.join(self.dir, "pgbouncer.ini")
        with open(config, "w") as handle:
            handle.write(
                "[databases]\n"
                f"* = host=127.0.0.1 port={self.server_port}\n"
                "[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
                f"unix_socket_dir =\nauth_type = trust\n"
                f"auth_file = {self.dir}/users.txt\n"
                "pool_mode = transaction\nmax_client_conn = 2000\n"
                f"default_pool_size = {self.pool_size}\n"
                f"ignore_startup_parameters = {self.ignore}\n"
                f"logfile = {self.dir}/pgbouncer.log\n"
                f"pidfile = {self.dir}/pgbouncer.pid\n"
            )
        open(os.path.join(self.dir, "pgbouncer.log"), "a").close()
        for name in os.listdir(self.dir):
            os.chmod(os.path.join(self.dir, name), 0o666)  # noqa: S103
        command = [self.binary, "-d", config]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "postgres"]
        subprocess.run(command, check=True, timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.dsn("postgres")) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def dsn(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        pidfile = os.path.join(self.dir, "pgbouncer.pid")
        if os.path.exists(pidfile):
            with open(pidfile) as handle:
                os.kill(int(handle.read().split()[0]), 15)
        shutil.rmtree(self.dir, ignore_errors=True)


def cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            out[pid] = times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return out


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two samples; a process born meanwhile counts from zero (one
    that ended meanwhile is lost: the worker's sessions live through the window)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def server_tree(server: Server) -> list[int]:
    root = server.postmaster()
    return [root.pid, *(child.pid for child in root.children(recursive=True))]


def client_ports(group: Group, server_port: int) -> set[int]:
    """The local ports of the group's TCP connections to the server."""
    ports = set()
    for process in group.processes():
        try:
            for conn in process.net_connections(kind="tcp"):
                if conn.raddr and conn.raddr.port == server_port:
                    ports.add(conn.laddr.port)
        except psutil.NoSuchProcess:
            continue
    return ports


def connections(server: Server, group: Group, database: str) -> Counter[str]:
    """The group's server sessions, counted by application_name (its purpose)."""
    ports = client_ports(group, server.port)
    found: Counter[str] = Counter()
    for port, name in server.backends(database).values():
        if port in ports:
            # "ultimate_jobs worker host:pid:abc123" -> "ultimate_jobs worker"
            found[" ".join(name.split(" ")[:2])] += 1
    return found


def system_for(server: Server, database: str) -> UltimateJobs:
    system = UltimateJobs(server.create(database), sys.executable)
    system.setup()
    return system


def measure_idle(
    server: Server,
    bouncer: Bouncer | None,
    run_dir: str,
    *,
    warmup: float,
    seconds: float,
    concurrency: int,
) -> list[dict[str, Any]]:
    """Every idle configuration side by side, each on its own database; the poll-only
    ones through PgBouncer when there is one."""
    started: list[tuple[Idle, str, Group]] = []
    try:
        for index, idle in enumerate(IDLE):
            database = f"idle_{index}"
            system = system_for(server, database)
            argv = system.worker(concurrency)[0] + list(idle.args)
            env = dict(idle.env)
            if idle.bouncer and bouncer is not None:
                env["DATABASE_URL"] = bouncer.dsn(database)
            if idle.one_name:
                url = env.get("DATABASE_URL", system.dsn)
                env["DATABASE_URL"] = f"{url}?application_name=ultimate_jobs"
            started.append(
                (
                    idle,
                    database,
                    Group(
                        [argv],
                        system.env(run_dir, **env),
                        os.path.join(run_dir, f"{database}.log"),
                    ),
                )
            )
        time.sleep(warmup)
        server.reset()  # the window's statements only (not the migrations)
        stats0 = server.stats()
        backends = {db: list(server.backends(db)) for _, db, _ in started}
        server_cpu0 = {db: cpu(pids) for db, pids in backends.items()}
        worker_cpu0 = {db: group.cpu_seconds() for _, db, group in started}
        began = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - began
        stats1 = server.stats()
        per_minute = 60.0 / elapsed
        results = []
        for idle, database, group in started:
            calls = stats1.get(database, {}).get("calls", 0) - stats0.get(
                database, {}
            ).get("calls", 0)
            server_cpu1 = cpu(list(server.backends(database)))
            exec_ms = stats1.get(database, {}).get("exec_ms", 0) - stats0.get(
                database, {}
            ).get("exec_ms", 0)
            plan_ms = stats1.get(database, {}).get("plan_ms", 0) - stats0.get(
                database, {}
            ).get("plan_ms", 0)
            through = idle.bouncer and bouncer is not None
            results.append(
                {
                    "label": idle.label,
                    "through_pgbouncer": through,
                    "one_application_name": idle.one_name,
                    "statements_per_minute": round(calls * per_minute, 1),
                    "server_exec_ms_per_minute": round(exec_ms * per_minute, 2),
                    "server_plan_ms_per_minute": round(plan_ms * per_minute, 2),
                    "worker_cpu_per_minute": round(
                        (group.cpu_seconds() - worker_cpu0[database]) * per_minute, 3
                    ),
                    "server_cpu_per_minute": round(
                        cpu_delta(server_cpu0[database], server_cpu1) * per_minute, 3
                    ),
                    # Behind PgBouncer: the server sessions the pooler holds for
                    # this database (it alone reaches it), and the worker's
                    # client connections to the pooler.
                    "connections": dict(connections(server, group, database))
                    if not through
                    else {
                        "server sessions (pgbouncer)": len(server.backends(database)),
                        "client connections to pgbouncer": len(
                            client_ports(group, bouncer.port)  # type: ignore[union-attr]
                        ),
                    },
                    "alive": group.alive(),
                    "top": server.top(database),
                }
            )
        return results
    finally:
        for _, _, group in started:
            group.stop()


def measure_drain(
    server: Server, run_dir: str, *, jobs: int, concurrency: int
) -> dict[str, Any]:
    """One worker process (worker role) drains ``jobs`` no-op jobs enqueued before."""
    database = f"drain_c{concurrency}"
    system = system_for(server, database)
    system.driver("fill", jobs, 1)
    record_dir = tempfile.mkdtemp(prefix="rec-", dir=run_dir)
    server.reset()
    tree0 = cpu(server_tree(server))
    group = Group(
        [system.worker(concurrency)[0] + ["--roles", "worker"]],
        system.env(record_dir),
        os.path.join(run_dir, f"{database}.log"),
    )
    records = Records(record_dir)
    peak: Counter[str] = Counter()
    try:
        last_move, seen = time.monotonic(), 0
        while seen < jobs:
            time.sleep(0.2)
            now_seen = records.poll()
            sample = connections(server, group, database)
            if sum(sample.values()) > sum(peak.values()):
                peak = sample
            if now_seen != seen:
                seen, last_move = now_seen, time.monotonic()
            elif time.monotonic() - last_move > 120 or not group.alive():
                raise RuntimeError(f"drain stuck at {seen} of {jobs}")
        settled = _wait_settled(system, jobs)
        stats = server.stats().get(database, {})
        tree1 = cpu(server_tree(server))
        top = server.top(database)
        after = dict(connections(server, group, database))
        worker_cpu = group.cpu_seconds()
    finally:
        group.stop()
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "settled": settled,
        "statements_per_job": round(stats.get("calls", 0) / jobs, 3),
        "rows_per_job": round(stats.get("rows", 0) / jobs, 3),
        "wal_bytes_per_job": round(stats.get("wal_bytes", 0) / jobs, 1),
        "server_exec_ms_per_job": round(stats.get("exec_ms", 0) / jobs, 4),
        "server_plan_ms_per_job": round(stats.get("plan_ms", 0) / jobs, 4),
        "server_cpu_ms_per_job": round(cpu_delta(tree0, tree1) * 1000 / jobs, 4),
        "worker_cpu_ms_per_job": round(worker_cpu * 1000 / jobs, 4),
        "peak_connections": dict(peak),
        "connections_after": after,
        "top": top,
    }


def measure_bouncer_drain(
    server: Server,
    bouncer: Bouncer,
    run_dir: str,
    *,
    jobs: int,
    processes: int,
    concurrency: int,
) -> dict[str, Any]:
    """``processes`` poll-only worker processes drain ``jobs`` through PgBouncer: the
    clients they open against the server sessions the pooler needs for them."""
    database = "drain_bouncer"
    system = system_for(server, database)
    system.driver("fill", jobs, 1)
    record_dir = tempfile.mkdtemp(prefix="rec-", dir=run_dir)
    server.reset()
    argv = system.worker(concurrency)[0] + ["--roles", "worker"]
    group = Group(
        [argv] * processes,
        system.env(
            record_dir,
            DATABASE_URL=f"{bouncer.dsn(database)}?application_name=ultimate_jobs",
            **dict(POLL_ONLY),
        ),
        os.path.join(run_dir, f"{database}.log"),
    )
    records = Records(record_dir)
    peak_server = peak_clients = 0
    try:
        last_move, seen = time.monotonic(), 0
        while seen < jobs:
            time.sleep(0.1)
            now_seen = records.poll()
            peak_server = max(peak_server, len(server.backends(database)))
            peak_clients = max(peak_clients, len(client_ports(group, bouncer.port)))
            if now_seen != seen:
                seen, last_move = now_seen, time.monotonic()
            elif time.monotonic() - last_move > 120 or not group.alive():
                raise RuntimeError(f"drain stuck at {seen} of {jobs}")
        settled = _wait_settled(system, jobs)
        stats = server.stats().get(database, {})
    finally:
        group.stop()
    return {
        "jobs": jobs,
        "processes": processes,
        "concurrency": concurrency,
        "settled": settled,
        "statements_per_job": round(stats.get("calls", 0) / jobs, 3),
        "peak_client_connections": peak_clients,
        "peak_server_sessions": peak_server,
        "pgbouncer_default_pool_size": bouncer.pool_size,
    }


def _wait_settled(system: UltimateJobs, jobs: int) -> int:
    """Every body ran; wait for the batched completions to land (read from the
    private server's admin session only after the statistics were taken would miss
    the last acks, so the count is read here, in the job database: one statement)."""
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(system.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM ultimate_jobs_job WHERE state = 'done'"
            ).fetchone()
        done = int(row[0]) if row else 0
        if done >= jobs or time.monotonic() > deadline:
            return done
        time.sleep(0.5)


def measure_enqueue(server: Server, *, count: int) -> dict[str, Any]:
    """Statements and WAL per job for enqueue one by one and enqueue_many (batches of
    1,000), each from a client process of its own (the driver)."""
    out: dict[str, Any] = {}
    for mode, extra in (("single", ()), ("bulk", (1000,))):
        database = f"enqueue_{mode}"
        system = system_for(server, database)
        server.reset()
        system.driver(mode, count, 1, *extra)
        stats = server.stats().get(database, {})
        out[mode] = {
            "jobs": count,
            "statements_per_job": round(stats.get("calls", 0) / count, 3),
            "wal_bytes_per_job": round(stats.get("wal_bytes", 0) / count, 1),
            "server_exec_ms_per_job": round(stats.get("exec_ms", 0) / count, 4),
            "server_plan_ms_per_job": round(stats.get("plan_ms", 0) / count, 4),
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--enqueues", type=int, default=2000)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--skip", default="", help="comma-separated: enqueue,drain,bouncer,idle"
    )
    parser.add_argument("--json", help="write the results to this file too")
    options = parser.parse_args(argv)
    skip = set(filter(None, options.skip.split(",")))
    server = Server()
    if missing := server.available():
        raise SystemExit(missing)
    bouncer: Bouncer | None = Bouncer(server.port)
    if bouncer is not None and (why := bouncer.available()):
        print(f"without PgBouncer: {why}", file=sys.stderr)
        bouncer = None
    run_dir = tempfile.mkdtemp(prefix="uj-capacity-")
    results: dict[str, Any] = {"machine": _machine()}
    try:
        server.start()
        server.prepare()
        if bouncer is not None:
            bouncer.start()
        os.chdir(REPO)
        if "enqueue" not in skip:
            results["enqueue"] = measure_enqueue(server, count=options.enqueues)
        if "drain" not in skip:
            results["drain"] = [
                measure_drain(server, run_dir, jobs=options.jobs, concurrency=c)
                for c in sorted({options.concurrency, 16})
            ]
        if "bouncer" not in skip and bouncer is not None:
            results["bouncer_drain"] = measure_bouncer_drain(
                server,
                bouncer,
                run_dir,
                jobs=options.jobs,
                processes=4,
                concurrency=options.concurrency,
            )
        if "idle" not in skip:
            results["idle"] = measure_idle(
                server,
                bouncer,
                run_dir,
                warmup=options.warmup,
                seconds=options.idle_seconds,
                concurrency=options.concurrency,
            )
    finally:
        if bouncer is not None:
            bouncer.stop()
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    text = json.dumps(results, indent=2, default=str)
    if options.json:
        with open(options.json, "w") as handle:
            handle.write(text + "\n")
    print(text)
    return results


def _machine() -> dict[str, Any]:
    version = (
        subprocess.run(
            ["postgres", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if shutil.which("postgres")
        else ""
    )
    return {
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "postgres": version,
        "python": sys.version.split()[0],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


if __name__ == "__main__":
    main()
