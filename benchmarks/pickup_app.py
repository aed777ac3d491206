"""Pickup in a realistic app against the one-job app, back to back (issue 26, N2).

    python -m benchmarks.pickup_app --server          # a private PostgreSQL (port 5531)
    python -m benchmarks.pickup_app --url postgres://postgres@127.0.0.1:5432 --pairs 3

Each pair runs the ``pickup`` scenario (benchmarks/scenarios.py) against the one-job
app (``uj``: benchmarks.ujapp, ``--roles worker``-like default of that app) and then
against the realistic app (``uj-app``: benchmarks/realapp, default roles, ~40 jobs, cron
tasks, INFO logging to a file, a row written per body), on the same server, and prints
p50/p95/p99 of each with the load average. Results land in benchmarks/.results/<time>/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
from typing import Any

from benchmarks import scenarios
from benchmarks.__main__ import ensure_database
from benchmarks.idle import PrivateServer
from benchmarks.systems.base import System
from benchmarks.systems.uj import UltimateJobs
from benchmarks.systems.uj_app import UltimateJobsApp

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pickup_app")
    parser.add_argument(
        "--server", action="store_true", help="start a private PostgreSQL"
    )
    parser.add_argument("--port", type=int, default=5531, help="its port")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "BENCH_SERVER_URL", "postgres://postgres@127.0.0.1:5432"
        ),
        help="the server without --server",
    )
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument(
        "--debug", action="store_true", help="the realistic app with DEBUG=True"
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="the realistic app on django-prometheus's database backend",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="also run this many busy-loop processes (a loaded machine)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="the workers' --concurrency"
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="the demo's declarations (testproject/demo) join the realistic app's",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="stamp the worker's stages of each pickup (benchmarks/trace.py)",
    )
    parser.add_argument("--only", choices=["uj", "uj-app"], help="one side only")
    return parser.parse_args(argv)


def line(name: str, result: dict[str, Any]) -> str:
    load = os.getloadavg()[0]
    if "p50" not in result:
        return f"{name:7} {result}  load {load:.2f}"
    return (
        f"{name:7} p50 {result['p50']:6.2f}  p95 {result['p95']:6.2f}  "
        f"p99 {result['p99']:6.2f}  max {result['max']:6.2f} ms  "
        f"({result['started']} jobs)  load {load:.2f}"
    )


def main(args: argparse.Namespace) -> int:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = os.path.join(HERE, ".results", f"pickup-app-{stamp}")
    os.makedirs(run_dir)
    ctx = scenarios.Context(
        run_dir=run_dir, pickup_jobs=args.jobs, pickup_concurrency=args.concurrency
    )
    server = None
    url = args.url
    if args.server:
        server = PrivateServer(settings={})
        server.port = args.port
        server.start()
        url = f"postgres://postgres@127.0.0.1:{args.port}"
    if args.trace:
        os.environ["BENCH_TRACE"] = "1"  # the workers inherit it
    results: list[dict[str, Any]] = []
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(args.busy)
    ]
    try:
        systems: list[System] = []
        for cls in (UltimateJobs, UltimateJobsApp):
            if args.only and cls.name != args.only:
                continue
            # not bench_uj: a shared server's bench_uj may be another run's
            database = f"pickup_app_{cls.name.replace('-', '_')}"
            system = cls(ensure_database(url, database))
            system.setup()
            systems.append(system)
            if isinstance(system, UltimateJobsApp):
                system.log_file = os.path.join(run_dir, "logs", "uj-app-info.log")
                os.makedirs(os.path.dirname(system.log_file), exist_ok=True)
                system.variant = {
                    "BENCH_DEBUG": "1" if args.debug else "0",
                    "BENCH_PROMETHEUS": "1" if args.prometheus else "0",
                    "BENCH_DEMO": "1" if args.demo else "0",
                }
        print(f"results and logs in {run_dir}", flush=True)
        for index in range(args.pairs):
            for system in systems:
                result = scenarios.pickup(ctx, system)
                result["load"] = os.getloadavg()
                results.append({"pair": index, "system": system.name, **result})
                print(f"pair {index}: {line(system.name, result)}", flush=True)
                if args.trace:
                    print(
                        "  ms after commit: "
                        + "  ".join(
                            f"{stage} {value:.2f}"
                            for stage, value in result.items()
                            if stage.startswith(("notify", "claim", "submit"))
                        ),
                        flush=True,
                    )
                with open(os.path.join(run_dir, "results.json"), "w") as out:
                    json.dump(results, out, indent=1)
    finally:
        for process in busy:
            process.kill()
            process.wait()
        if server is not None:
            server.stop()
    return 0


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    raise SystemExit(main(parse(sys.argv[1:])))
