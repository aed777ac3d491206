"""Idle cost: statements and CPU per idle minute per worker.

pg_stat_statements is not installed on the shared server, and xact counters in
pg_stat_database count transactions, not statements (a BEGIN … COMMIT of three
statements is one). So the count comes from a PRIVATE PostgreSQL started for this
scenario from the same installed binaries, with ``log_statement = 'all'`` and a log
line prefix naming the database: every statement any worker sends — claims,
heartbeats, registry writes, LISTEN, BEGIN/COMMIT — is one ``statement:`` or
``execute …:`` line (extended-protocol statements log once, at execute), and each
system has a database of its own. The workers of every system idle side by side for
the same minute; nothing else connects to their databases meanwhile. CPU is the
user+system time of each worker's process tree over the same window (psutil).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from typing import Any

import psycopg

from benchmarks.procs import Group
from benchmarks.systems.base import REPO, System


def _bindir() -> str | None:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    try:
        out = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    bindir = out.stdout.strip()
    return bindir if os.path.exists(os.path.join(bindir, "initdb")) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The idle scenario's server: every statement logged, the log prefix naming the database.
LOGGED = {"log_statement": "all", "log_line_prefix": "%d:"}


class PrivateServer:
    """A throw-away PostgreSQL (by default with every statement logged).

    ``settings`` are its server settings (``-c name=value``; no shell metacharacters:
    pg_ctl passes them through sh); benchmarks/capacity.py loads pg_stat_statements.
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = LOGGED if settings is None else settings
        self.bindir = _bindir()
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="uj-bench-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.user: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self.user = ["runuser", "-u", "postgres", "--"]

    def available(self) -> str | None:
        if not self.bindir:
            return "no PostgreSQL server binaries (initdb) found"
        return None

    def dsn(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        assert self.bindir
        subprocess.run(
            [
                *self.user,
                f"{self.bindir}/initdb",
                "-D",
                self.data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.dir}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=off",
                "-c max_connections=200",
                *(f"-c {name}={value}" for name, value in self.settings.items()),
            ]
        )
        subprocess.run(
            [
                *self.user,
                f"{self.bindir}/pg_ctl",
                "-D",
                self.data,
                "-l",
                self.log,
                "-o",
                options,
                "-w",
                "start",
            ],
            # not captured: the server inherits pg_ctl's descriptors and holds them open
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def create(self, database: str) -> str:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')  # type: ignore[arg-type]
        return self.dsn(database)

    def stop(self) -> None:
        if self.bindir and os.path.exists(self.data):
            subprocess.run(
                [
                    *self.user,
                    f"{self.bindir}/pg_ctl",
                    "-D",
                    self.data,
                    "-m",
                    "fast",
                    "stop",
                ],
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def statements(self, start: int, end: int) -> Counter[str]:
        """Statements per database logged between two byte offsets of the log."""
        with open(self.log, "rb") as handle:
            handle.seek(start)
            text = handle.read(end - start).decode(errors="replace")
        counts: Counter[str] = Counter()
        for line in text.splitlines():
            database, sep, rest = line.partition(":")
            if sep and (rest.startswith(("LOG:  statement: ", "LOG:  execute "))):
                counts[database] += 1
        return counts

    def size(self) -> int:
        return os.path.getsize(self.log)


def measure(
    systems: list[type[System]],
    python: str,
    run_dir: str,
    *,
    concurrency: int = 4,
    warmup: float = 20.0,
    seconds: float = 60.0,
) -> dict[str, dict[str, Any]]:
    """Idle every system's worker side by side; answer statements and CPU per minute."""
    server = PrivateServer()
    if missing := server.available():
        return {cls.name: {"skipped": missing} for cls in systems}
    results: dict[str, dict[str, Any]] = {}
    groups: dict[str, tuple[System, Group]] = {}
    os.makedirs(os.path.join(run_dir, "logs"), exist_ok=True)
    try:
        server.start()
        for cls in systems:
            database = f"idle_{cls.name}"
            dsn = server.create(database) if cls.postgres else ""
            system = cls(dsn, python)
            if why := system.available():
                results[cls.name] = {"skipped": why}
                continue
            system.setup()
            record_dir = os.path.join(run_dir, "records", f"{cls.name}-idle")
            os.makedirs(record_dir, exist_ok=True)
            os.chdir(REPO)
            workers = cls.idle_concurrency or concurrency
            groups[cls.name] = (
                system,
                Group(
                    system.worker(workers),
                    system.env(record_dir, **system.worker_env(workers)),
                    os.path.join(run_dir, "logs", f"{cls.name}-idle.log"),
                ),
            )
        time.sleep(warmup)
        begin_offset = server.size()
        cpu0 = {name: group.cpu_seconds() for name, (_, group) in groups.items()}
        began = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - began
        cpu1 = {name: group.cpu_seconds() for name, (_, group) in groups.items()}
        counts = server.statements(begin_offset, server.size())
        per_minute = 60.0 / elapsed
        for name, (system, group) in groups.items():
            results[name] = {
                "statements": counts.get(f"idle_{name}", 0) * per_minute
                if system.postgres
                else None,
                "cpu": (cpu1[name] - cpu0[name]) * per_minute,
                "alive": group.alive(),
            }
    finally:
        for _, group in groups.values():
            group.stop()
        server.stop()
    return results
