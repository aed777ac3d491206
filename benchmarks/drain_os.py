"""The OS's view of a drain: user and system CPU, context switches per job, per thread.

    .venv-bench/bin/python -m benchmarks.drain_os --systems uj,pgqueuer --rounds 3 \
        --jobs 60000 --concurrency 16 --server postgres://postgres@127.0.0.1:5432 \
        --prefix bench_me_

Each round drains ``--jobs`` no-op jobs through each system in turn (rotated order) at
one concurrency, the way ``python -m benchmarks`` runs its drain scenario, and reads
``/proc/PID/task/*/stat`` and ``.../status`` of the worker at the first job run and at
the last: user and system CPU, voluntary and involuntary context switches, summed over
the worker's threads. With ``--perf``, ``perf stat`` counts the same window's context
switches and CPU migrations as the kernel's scheduler sees them. ``rest_us`` is the CPU
of every thread but the two busiest (the claim loop and the acks): the handler threads.

An A/B of two commits: ``--systems uj@base,uj@new --variant base=REPO=/tmp/base`` runs
``uj@base`` from another checkout (``git archive <commit> | tar -x -C /tmp/base``);
``--variant NAME=K=V`` passes any other setting to the worker's environment, ``--env K=V``
to every ultimate_jobs worker. The databases are ``<prefix><system>`` (TRUNCATEd).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.__main__ import ensure_database
from benchmarks.record import Records
from benchmarks.scenarios import analyse_drain, wait_for
from benchmarks.systems import ALL, System
from benchmarks.systems.base import REPO

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[int, dict[str, float]]:
    """Per thread of ``pid``: utime and stime (s), voluntary and involuntary switches."""
    found: dict[int, dict[str, float]] = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as handle:
                stat = handle.read()
            with open(f"{base}/{tid}/status") as handle:
                status = handle.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        entry = {"user": int(fields[11]) / TICK, "sys": int(fields[12]) / TICK}
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                entry["vcsw"] = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                entry["ivcsw"] = int(line.split()[1])
        found[int(tid)] = entry
    return found


def drain_once(
    system: System,
    jobs: int,
    concurrency: int,
    cap: float,
    env_extra: dict[str, str],
    *,
    perf: bool,
) -> dict[str, Any]:
    system.reset()
    record_dir = tempfile.mkdtemp(prefix=f"drain-os-{system.name}-")
    system.driver("fill", jobs, 1)
    argv = system.worker(concurrency)[0]
    env_extra = dict(env_extra)
    repo = env_extra.pop("REPO", None)  # another checkout's code (an A/B of commits)
    env = system.env(record_dir, **system.worker_env(concurrency), **env_extra)
    if repo is not None:
        argv = argv[:1] + [
            repo + arg[len(str(REPO)) :] if arg.startswith(str(REPO)) else arg
            for arg in argv[1:]
        ]
        env["PYTHONPATH"] = repo
    log = open(os.path.join(record_dir, "worker.log"), "ab")
    popen = subprocess.Popen(
        argv,
        env=env,
        cwd=repo or REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    records = Records(record_dir)
    result: dict[str, Any] = {}
    perf_proc = None
    try:
        deadline = time.monotonic() + cap
        first = wait_for(records, 1, deadline)
        pid = popen.pid  # the workers measured here never fork
        before, t0 = threads(pid), time.monotonic()
        if perf:
            perf_out = os.path.join(record_dir, "perf.txt")
            perf_proc = subprocess.Popen(
                [
                    "perf",
                    "stat",
                    "-x,",
                    "-o",
                    perf_out,
                    "-e",
                    "context-switches,cpu-migrations,task-clock",
                    "-p",
                    str(pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        last = wait_for(records, jobs, deadline)
        after, t1 = threads(pid), time.monotonic()
        if perf_proc is not None:
            perf_proc.send_signal(signal.SIGINT)
            perf_proc.wait(10)
            with open(perf_out) as handle:
                for line in handle:
                    parts = line.strip().split(",")
                    if len(parts) > 2 and parts[0] and parts[0][0].isdigit():
                        result[f"perf_{parts[2]}"] = float(parts[0])
        n = last - first
        totals = dict.fromkeys(("user", "sys", "vcsw", "ivcsw"), 0.0)
        per_thread = []
        for tid, now in after.items():
            was = before.get(tid, dict.fromkeys(now, 0.0))
            delta = {k: now.get(k, 0.0) - was.get(k, 0.0) for k in totals}
            for k in totals:
                totals[k] += delta[k]
            per_thread.append((tid, delta))
        result |= {
            "jobs": n,
            "seconds": t1 - t0,
            "user_us": totals["user"] / n * 1e6,
            "sys_us": totals["sys"] / n * 1e6,
            "cpu_us": (totals["user"] + totals["sys"]) / n * 1e6,
            "vcsw_per_job": totals["vcsw"] / n,
            "ivcsw_per_job": totals["ivcsw"] / n,
            "threads": len(after),
            # The two busiest threads are the claim loop and the acks; the rest are
            # the handlers (and idle helpers): the handler side's CPU per job.
            "rest_us": sum(sorted(d["user"] + d["sys"] for _, d in per_thread)[:-2])
            / n
            * 1e6,
            "busy_threads": sorted(
                (
                    {
                        "tid": tid,
                        "cpu_us": (d["user"] + d["sys"]) / n * 1e6,
                        "csw": (d["vcsw"] + d["ivcsw"]) / n,
                    }
                    for tid, d in per_thread
                    if d["vcsw"] + d["ivcsw"] > n * 0.01
                ),
                key=lambda t: t["tid"],
            ),
        }
        if perf:
            for key in ("context-switches", "cpu-migrations"):
                if f"perf_{key}" in result:
                    result[f"perf_{key}_per_job"] = result.pop(f"perf_{key}") / n
    finally:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        log.close()
    records.poll()
    result |= analyse_drain(records.items, jobs)
    shutil.rmtree(record_dir, ignore_errors=True)
    system.reset()
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--prefix", required=True, help="database name prefix")
    parser.add_argument("--systems", default="uj,pgqueuer")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=60_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--cap", type=float, default=120.0)
    parser.add_argument("--perf", action="store_true")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--env", action="append", default=[], help="K=V for uj")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=K=V: the system uj@NAME runs with K=V in its environment",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    names = args.systems.split(",")
    systems = []
    for name in names:
        label, _, variant = name.partition("@")
        cls = ALL[label]
        system = cls(ensure_database(args.server, f"{args.prefix}{label}"), args.python)
        system.setup()
        extra = dict(e.split("=", 1) for e in args.env) if label == "uj" else {}
        for spec in args.variant:
            vname, _, setting = spec.partition("=")
            if vname == variant:
                key, _, value = setting.partition("=")
                extra[key] = value
        systems.append((name, system, extra))
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in systems}
    for round_no in range(args.rounds):
        order = systems[round_no % len(systems) :] + systems[: round_no % len(systems)]
        for name, system, extra in order:
            load = os.getloadavg()[0]
            r = drain_once(
                system, args.jobs, args.concurrency, args.cap, extra, perf=args.perf
            )
            r["load"] = load
            rows[name].append(r)
            brief = {
                k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in r.items()
                if k != "busy_threads" or args.verbose
            }
            print(f"round {round_no} {name}: {json.dumps(brief)}", flush=True)
    keys = (
        "rate",
        "cpu_us",
        "rest_us",
        "user_us",
        "sys_us",
        "vcsw_per_job",
        "ivcsw_per_job",
        "perf_context-switches_per_job",
        "perf_cpu-migrations_per_job",
    )
    for name, results in rows.items():
        med = {
            k: round(
                statistics.median(r[k] for r in results if r.get(k) is not None), 3
            )
            for k in keys
            if any(r.get(k) is not None for r in results)
        }
        print(f"median {name}: {json.dumps(med)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
