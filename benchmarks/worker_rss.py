"""RSS of one ``jobs_worker``: idle after its start, and its peak draining a backlog.

``python -m benchmarks.worker_rss [--jobs N] [--concurrency C] [--rounds R]
[--roles ROLES] [--python PY] [--repo PATH]`` against ``DATABASE_URL`` (a database of
its own, never one of the harness's ``bench_*``; it is migrated, then emptied before
each drain):

* idle: a ``jobs_worker --concurrency C`` on an empty queue, its RSS ``--idle``
  seconds after its start (imports, checks, threads and connections done);
* drain: the harness's drain scenario (``benchmarks/scenarios.py``: N no-op jobs
  filled first, the worker started, RSS of the process sampled every 0.2 s until every
  job ran), its peak RSS, jobs/s and worker CPU per job.

``--roles`` runs the worker with those roles (default: the command's, which include
the scheduler: a lone worker leads it and loads croniter); ``--python`` runs the worker
and the driver with another interpreter (a virtual environment with ``psycopg[c]``,
say); ``--repo`` runs another checkout's code (an A/B pair). Prints one line per round
and measurement.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from benchmarks.procs import Group
from benchmarks.scenarios import MIB, Context, drain
from benchmarks.systems.uj import UltimateJobs


class Checkout(UltimateJobs):
    """ultimate_jobs from another checkout, run by another interpreter."""

    def __init__(
        self, dsn: str, python: str, repo: str, roles: str | None = None
    ) -> None:
        super().__init__(dsn, python)
        self.repo = repo
        self.roles = roles

    def env(self, record_dir: str | None = None, **extra: str) -> dict[str, str]:
        env = super().env(record_dir, **extra)
        env["PYTHONPATH"] = self.repo
        return env

    def setup(self) -> None:
        manage = os.path.join(self.repo, "manage.py")
        self.run([self.python, manage, "migrate", "--noinput", "-v0"])

    def worker(self, concurrency: int, *, processes: int = 1) -> list[list[str]]:
        manage = os.path.join(self.repo, "manage.py")
        argv = [self.python, manage, "jobs_worker", "--concurrency", str(concurrency)]
        return [argv + (["--roles", self.roles] if self.roles else [])]


def idle_rss(system: Checkout, concurrency: int, seconds: float, log: str) -> float:
    group = Group(system.worker(concurrency), system.env(tempfile.mkdtemp()), log)
    try:
        time.sleep(seconds)
        return group.rss() / MIB
    finally:
        group.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle", type=float, default=6.0)
    parser.add_argument("--roles", default=None)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repo", default=os.getcwd())
    args = parser.parse_args()
    dsn = os.environ["DATABASE_URL"]
    if dsn.rstrip("/").rsplit("/", 1)[-1].startswith("bench_"):
        raise SystemExit("worker_rss: give it a database of its own, not bench_*")
    system = Checkout(dsn, args.python, os.path.abspath(args.repo), args.roles)
    system.setup()
    run_dir = tempfile.mkdtemp(prefix="uj-worker-rss-")
    ctx = Context(run_dir=run_dir, drain_jobs=args.jobs, drain_cap=300.0)
    for n in range(args.rounds):
        system.reset()
        log = os.path.join(run_dir, f"idle-{n}.log")
        idle = idle_rss(system, args.concurrency, args.idle, log)
        print(
            f"round {n + 1}: idle c={args.concurrency} RSS {idle:.1f} MiB", flush=True
        )
        result = drain(ctx, system, args.concurrency)
        print(
            f"round {n + 1}: drain {args.jobs} jobs c={args.concurrency} peak RSS "
            f"{result['peak_rss_mib']:.1f} MiB, {result.get('rate', 0):,.0f} jobs/s, "
            f"{result.get('cpu_us_per_job', 0):.0f} us CPU/job",
            flush=True,
        )


if __name__ == "__main__":
    main()
