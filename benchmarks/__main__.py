"""``python -m benchmarks``: every scenario, every system, interleaved rounds.

    benchmarks/run                      # makes .venv-bench with the peers, then this
    benchmarks/run --rounds 3 --million # and the opt-in 1,000,000-job drain

Each round runs every scenario against every system in a rotated order, so a noisy
neighbour hurts all systems alike; the table shows the median over the rounds.
Results land in benchmarks/.results/<time>/ (results.json, report.md, logs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import psycopg

from benchmarks import idle, pgbench, report, scenarios
from benchmarks.systems import ALL, System

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--server",
        default=os.environ.get(
            "BENCH_SERVER_URL", "postgres://postgres@127.0.0.1:5432"
        ),
        help="PostgreSQL server; each system gets its own database bench_<system>",
    )
    parser.add_argument("--systems", default=",".join(ALL), help="comma-separated")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help="comma-separated"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drain-jobs", type=int, default=20_000)
    parser.add_argument(
        "--drain-cap",
        type=float,
        default=120.0,
        help="seconds a drain may take; a slower system is measured on what it ran",
    )
    parser.add_argument("--concurrency", default="1,4,16", help="drain concurrencies")
    parser.add_argument("--single-jobs", type=int, default=2_000)
    parser.add_argument("--bulk-jobs", type=int, default=20_000)
    parser.add_argument("--pickup-jobs", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument(
        "--million",
        action="store_true",
        help="also drain 1,000,000 jobs through ultimate_jobs (RSS must stay flat)",
    )
    parser.add_argument("--million-jobs", type=int, default=1_000_000)
    parser.add_argument(
        "--million-cap",
        type=float,
        default=3600.0,
        help="seconds the million-job drain may take; RSS is reported up to there",
    )
    return parser.parse_args(argv)


SCENARIOS = ["enqueue", "drain", "pickup", "pgbench", "idle"]
# Opt-in (--scenarios pickup,pickup-app): pickup in a realistic app, ultimate_jobs only.
OPT_IN = ["pickup-app"]


def ensure_database(server: str, name: str) -> str:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not found:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    return f"{server}/{name}"


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_dir = os.path.join(HERE, ".results", stamp)
        os.makedirs(self.run_dir)
        self.ctx = scenarios.Context(
            run_dir=self.run_dir,
            drain_jobs=args.drain_jobs,
            drain_cap=args.drain_cap,
            single_jobs=args.single_jobs,
            bulk_jobs=args.bulk_jobs,
            pickup_jobs=args.pickup_jobs,
        )
        self.results: dict[str, Any] = {
            "started": stamp,
            "args": vars(args),
            "machine": report.machine(args.server),
            "rounds": [],
            "skipped": {},
        }
        self.systems: list[System] = []
        self._app: System | None = None

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def prepare(self) -> None:
        for name in self.args.systems.split(","):
            cls = ALL[name.strip()]
            dsn = (
                ensure_database(self.args.server, f"bench_{cls.name}")
                if cls.postgres
                else ""
            )
            system = cls(dsn, sys.executable)
            if why := system.available():
                self.results["skipped"][cls.name] = why
                self.say(f"skip {cls.label}: {why}")
                continue
            system.setup()
            self.systems.append(system)
        self.pgbench_dsn = None
        if "pgbench" in self.args.scenarios and pgbench.available() is None:
            self.pgbench_dsn = ensure_database(self.args.server, "bench_pgbench")
            pgbench.setup(self.pgbench_dsn)

    def attempt(self, what: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        began = time.monotonic()
        try:
            result = call()
        except Exception as exc:
            traceback.print_exc()
            result = {"error": f"{exc.__class__.__name__}: {str(exc)[:300]}"}
        self.say(f"{what}: {report.brief(result)} ({time.monotonic() - began:.0f}s)")
        return result

    def round(self, index: int) -> dict[str, Any]:
        wanted = self.args.scenarios.split(",")
        shift = index % max(1, len(self.systems))
        order = self.systems[shift:] + self.systems[:shift]
        out: dict[str, Any] = {}

        def put(metric: str, system: str, value: dict[str, Any]) -> None:
            out.setdefault(metric, {})[system] = value

        ctx = self.ctx
        if "enqueue" in wanted:
            for system in order:
                put(
                    "enqueue_single",
                    system.name,
                    self.attempt(
                        f"r{index} enqueue one by one {system.label}",
                        lambda s=system: scenarios.enqueue_single(ctx, s),
                    ),
                )
                put(
                    "enqueue_bulk",
                    system.name,
                    self.attempt(
                        f"r{index} enqueue bulk {system.label}",
                        lambda s=system: scenarios.enqueue_bulk(ctx, s),
                    ),
                )
        if "drain" in wanted:
            for concurrency in map(int, self.args.concurrency.split(",")):
                for system in order:
                    put(
                        f"drain_c{concurrency}",
                        system.name,
                        self.attempt(
                            f"r{index} drain c={concurrency} {system.label}",
                            lambda s=system, c=concurrency: scenarios.drain(ctx, s, c),
                        ),
                    )
                for system in order:
                    if system.name == "uj" and concurrency == 16:
                        put(
                            "drain_c16_p2",
                            system.name,
                            self.attempt(
                                f"r{index} drain c=16 --processes 2 {system.label}",
                                lambda s=system: scenarios.drain(
                                    ctx, s, 16, processes=2
                                ),
                            ),
                        )
        if "pickup" in wanted:
            self.pickup(index, order, put)
        if "pickup-app" in wanted:
            self.pickup_app(index, out)
        if "pgbench" in wanted and self.pgbench_dsn:
            for kind in ("single", "batched"):
                put(
                    f"pgbench_{kind}",
                    "pgbench",
                    self.attempt(
                        f"r{index} pgbench lifecycle {kind}",
                        lambda k=kind: pgbench.run(
                            self.pgbench_dsn, k, seconds=self.args.pgbench_seconds
                        ),
                    ),
                )
        return out

    def pickup(
        self,
        index: int,
        order: list[System],
        put: Callable[[str, str, dict[str, Any]], None],
    ) -> None:
        ctx = self.ctx
        for system in order:
            put(
                "pickup",
                system.name,
                self.attempt(
                    f"r{index} pickup {system.label}",
                    lambda s=system: scenarios.pickup(ctx, s),
                ),
            )
        for system in order:
            if system.name == "uj":
                put(
                    "pickup_outbox",
                    system.name,
                    self.attempt(
                        f"r{index} pickup through the outbox {system.label}",
                        lambda s=system: scenarios.pickup(ctx, s, outbox=True),
                    ),
                )

    def pickup_app(self, index: int, out: dict[str, Any]) -> None:
        """Issue 26: the pickup scenario in a realistic app (benchmarks/realapp)."""
        from benchmarks.systems.uj_app import UltimateJobsApp

        if not any(system.name == "uj" for system in self.systems):
            return
        if self._app is None:
            app = UltimateJobsApp(ensure_database(self.args.server, "bench_uj_app"))
            app.setup()
            app.log_file = os.path.join(self.run_dir, "logs", "uj-app-info.log")
            self._app = app
        app = self._app
        out.setdefault("pickup_app", {})["uj"] = self.attempt(
            f"r{index} pickup in a realistic app ultimate_jobs",
            lambda: scenarios.pickup(self.ctx, app),
        )

    def main(self) -> int:
        self.say(f"results and logs in {self.run_dir}")
        self.prepare()
        for index in range(self.args.rounds):
            self.results["rounds"].append(self.round(index))
            self.save()
        if "idle" in self.args.scenarios.split(","):
            self.say(
                f"idle: every worker side by side for {self.args.idle_seconds:.0f}s"
            )
            self.results["idle"] = idle.measure(
                [type(s) for s in self.systems],
                sys.executable,
                self.run_dir,
                seconds=self.args.idle_seconds,
            )
            self.say(f"idle: {self.results['idle']}")
        if self.args.million:
            uj = next((s for s in self.systems if s.name == "uj"), None)
            if uj is not None:
                self.results["million"] = self.attempt(
                    f"drain {self.args.million_jobs:,} jobs ultimate_jobs c=16",
                    lambda: scenarios.million(
                        self.ctx, uj, self.args.million_jobs, cap=self.args.million_cap
                    ),
                )
        self.save()
        text = report.render(self.results)
        with open(os.path.join(self.run_dir, "report.md"), "w") as handle:
            handle.write(text)
        print()
        print(text)
        return 0

    def save(self) -> None:
        with open(os.path.join(self.run_dir, "results.json"), "w") as handle:
            json.dump(self.results, handle, indent=1, default=str)


def _exit_on_signal(signum: int, frame: object) -> None:
    # SystemExit unwinds through every `finally`, which stops the workers started
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)  # also when started with `&`
    raise SystemExit(Runner(parse(sys.argv[1:])).main())
