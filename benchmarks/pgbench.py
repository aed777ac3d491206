"""The physical limit: pgbench running the bare SQL of a job's lifecycle.

Three statements per job, each its own transaction as in a real queue: insert the job,
claim it (``FOR UPDATE SKIP LOCKED`` on a partial index of ready rows, stamping the
claimer), complete it (fenced on the claimer). "single" does it for one job per
transaction; "batched" for 100 jobs per transaction (an INSERT of 100 rows, a claim of
100, a completion of 100). No payload handling, no Python, no network beyond loopback:
nothing a job queue could do is cheaper, so it is the ceiling a drain is compared with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Any
from urllib.parse import urlsplit

import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_job (
    id bigserial PRIMARY KEY,
    queue text NOT NULL DEFAULT 'default',
    state text NOT NULL DEFAULT 'ready',
    payload jsonb NOT NULL DEFAULT '{}',
    run_at timestamptz NOT NULL DEFAULT now(),
    owner integer
);
CREATE INDEX IF NOT EXISTS bench_job_ready ON bench_job (queue, run_at, id)
    WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS bench_job_running ON bench_job (owner)
    WHERE state = 'running';
"""

CLAIM = """UPDATE bench_job SET state = 'running', owner = :client_id
 WHERE id IN (SELECT id FROM bench_job
               WHERE state = 'ready' AND queue = 'default'
               ORDER BY run_at, id LIMIT {n} FOR UPDATE SKIP LOCKED);"""
COMPLETE = "UPDATE bench_job SET state = 'done' WHERE owner = :client_id AND state = 'running';"
SCRIPTS = {
    "single": "\n".join(
        [
            "INSERT INTO bench_job (payload) VALUES ('{\"n\": 1}');",
            CLAIM.format(n=1).replace("\n", " "),
            COMPLETE,
        ]
    ),
    "batched": "\n".join(
        [
            "INSERT INTO bench_job (payload)"
            " SELECT jsonb_build_object('n', g) FROM generate_series(1, 100) g;",
            CLAIM.format(n=100).replace("\n", " "),
            COMPLETE,
        ]
    ),
}
JOBS_PER_SCRIPT = {"single": 1, "batched": 100}


def available() -> str | None:
    return None if shutil.which("pgbench") else "pgbench is not installed"


def setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)  # type: ignore[arg-type]


def run(dsn: str, kind: str, clients: int = 16, seconds: int = 10) -> dict[str, Any]:
    """Jobs per second through the whole lifecycle (insert, claim, complete)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE bench_job")
    parts = urlsplit(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(SCRIPTS[kind] + "\n")
    try:
        done = subprocess.run(
            [
                "pgbench",
                "-n",
                "-h",
                parts.hostname or "127.0.0.1",
                "-p",
                str(parts.port or 5432),
                "-U",
                parts.username or "postgres",
                "-c",
                str(clients),
                "-j",
                str(min(clients, os.cpu_count() or 1)),
                "-T",
                str(seconds),
                "-f",
                script.name,
                parts.path.lstrip("/"),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PGPASSWORD": parts.password or ""},
        )
    finally:
        os.unlink(script.name)
    match = re.search(
        r"tps = ([\d.]+) \(without initial connection time\)", done.stdout
    )
    if not match:
        raise RuntimeError(f"pgbench said:\n{done.stdout}\n{done.stderr}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE bench_job")
    return {"rate": float(match.group(1)) * JOBS_PER_SCRIPT[kind]}
