"""What the orchestrator needs from every system under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import psycopg

REPO = Path(__file__).resolve().parents[2]
MANAGE = str(REPO / "manage.py")


class System:
    """One queue library: its database, its worker command and its client."""

    name: ClassVar[str]
    label: ClassVar[str]
    bulk: ClassVar[bool] = True  # has a public bulk enqueue
    postgres: ClassVar[bool] = True  # stores jobs in PostgreSQL
    concurrency_note: ClassVar[str] = ""
    idle_concurrency: ClassVar[int | None] = None  # the idle worker's, if not 4

    def __init__(self, dsn: str, python: str = sys.executable) -> None:
        self.dsn = dsn  # this system's own database
        self.python = python

    # -- environment -----------------------------------------------------------

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env["DATABASE_URL"] = self.dsn
        env["PYTHONPATH"] = str(REPO)
        env["PYTHONUNBUFFERED"] = "1"
        if record_dir:
            env["BENCH_RECORD_DIR"] = record_dir
        env.update(extra)
        return env

    def run(self, argv: Sequence[str], **extra: str) -> str:
        done = subprocess.run(
            list(argv),
            env=self.env(**extra),
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(
                f"{self.name}: {' '.join(argv)} failed ({done.returncode}):\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
        return done.stdout

    def driver(self, *args: object, record_dir: str | None = None) -> dict[str, Any]:
        """Run ``python -m benchmarks.driver <system> args`` and answer its JSON."""
        out = self.run(
            [self.python, "-m", "benchmarks.driver", self.name, *map(str, args)],
            **({"BENCH_RECORD_DIR": record_dir} if record_dir else {}),
        )
        return json.loads(out.strip().splitlines()[-1])

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    # -- what each system says -------------------------------------------------

    def available(self) -> str | None:
        """None when the system can run here, else why not."""
        return None

    def setup(self) -> None:
        """Create the system's schema in its (empty or already set up) database."""
        raise NotImplementedError

    def reset(self) -> None:
        """Remove every job, finished or not."""
        raise NotImplementedError

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        """The command lines of a worker of this concurrency (one per process)."""
        raise NotImplementedError

    def worker_env(self, concurrency: int) -> dict[str, str]:
        """Extra environment of that worker."""
        return {}


class Client:
    """The enqueue side, inside the driver process (public API only)."""

    commit_ns: int | None = None  # when the last enqueue's commit returned, if known

    def open(self) -> None:
        """Set up what an application would hold open (Django, a pool, an app)."""

    def close(self) -> None:
        pass

    def enqueue(self, n: int) -> None:
        raise NotImplementedError

    def enqueue_many(self, numbers: Sequence[int]) -> None:
        raise NotImplementedError

    def fill(self, numbers: Sequence[int]) -> None:
        """Put many jobs on the queue the fastest public way (not timed)."""
        for start in range(0, len(numbers), 1000):
            chunk = numbers[start : start + 1000]
            self.enqueue_many(chunk)

    def enqueue_outbox(self, n: int) -> None:
        raise NotImplementedError
