"""The chaos run: ``scripts/chaos [--short]`` (docs/operations.md, "Chaos run").

On a PRIVATE PostgreSQL it starts itself (pgserver, a temporary directory, a Unix
socket: never the machine's shared server) it runs 3 worker processes, 2 relays and
2 schedulers, enqueues a mix of jobs in waves (plain, retrying, stepped with sleeps
and events, keyed-limited, outbox-staged; three every-minute cron tasks fire too),
and meanwhile injects faults: SIGKILL and SIGTERM of every role, fast and immediate
restarts of PostgreSQL and one outage. Then it lets the fleet settle and checks, from
the database and the bodies' own records (verify.py): nothing lost, nothing stuck,
every job that ran twice explained by a lapsed lease, no cron occurrence fired twice,
no outbox row published twice, no step re-run after it committed. It prints a table
of the faults and their outcomes, then the figures, and exits 1 on any violation.

    scripts/chaos             the full run: 20,000 jobs, 52 faults, a 30 s outage
    scripts/chaos --short     about 2 minutes: 2,500 jobs, 12 faults, a 10 s outage
    scripts/chaos --max-connections 20
                              the same on a server with max_connections = 20 (issue
                              31): the fleet asks for more than the server has; the
                              run reports double completions (bodies that finished
                              twice) and whether an operator's `jobs stats` answered
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

LEASE = 5.0  # seconds: the lease of jobs, relays' claims and the scheduler's lead


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    parser.add_argument("--short", action="store_true", help="the ~2 minute CI run")
    parser.add_argument("--jobs", type=int, help="jobs to enqueue (20000; short 2500)")
    parser.add_argument("--seed", type=int, default=17, help="fault order and inputs")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run directory and its logs"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        help="run on a server with this max_connections (the starvation phase: 20),"
        " with small processes the connection budget admits or refuses",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="start every process with --force (past the connection budget) and the"
        " default sizes: an oversubscribed fleet",
    )
    return parser.parse_args()


def main() -> int:
    args = parse()
    jobs = args.jobs or (2500 if args.short else 20000)
    phase = 75.0 if args.short else 420.0  # seconds of faults and enqueues
    outage = 10.0 if args.short else 30.0
    run_dir = Path(tempfile.mkdtemp(prefix="uj-chaos-"))
    (run_dir / "logs").mkdir()
    records = run_dir / "records"
    records.mkdir()

    from tests.private_pg import PrivateServer

    print(f"==> chaos run in {run_dir}: private PostgreSQL starting", flush=True)
    server = PrivateServer(prefix="uj-chaos-pg-")
    if args.max_connections:
        with server.connect() as conn:  # the private server only
            conn.execute(
                f"ALTER SYSTEM SET max_connections = {int(args.max_connections)}"
            )
        server.restart("fast")
        print(f"==> max_connections = {args.max_connections}", flush=True)
    try:
        return run(args, server, run_dir, records, jobs, phase, outage)
    finally:
        server.destroy()
        if args.keep:
            print(f"==> run directory kept: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def run(args, server, run_dir, records, jobs, phase, outage) -> int:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.chaosapp.settings",
            "DATABASE_URL": server.url,
            "UJ_CHAOS_RECORDS": str(records),
        }
    )
    for name in [n for n in os.environ if n.startswith("ULTIMATE_JOBS_")]:
        del os.environ[name]
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from . import verify, workload
    from .fleet import Fleet, env_for, inject, plan

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE chaos_effect (id bigserial PRIMARY KEY, job_id uuid NOT NULL,"
            " step text NOT NULL, nonce text NOT NULL)"
        )
    sized = bool(args.max_connections) and not args.force
    fleet = Fleet(
        server, run_dir, env_for(server, records, LEASE, sized=sized), force=args.force
    )
    faults = plan(args.short, args.seed)
    work = workload.Workload(total=jobs, waves=int(phase / 0.5), seed=args.seed)
    print(
        f"==> {jobs} jobs over {phase:.0f} s, {len(faults)} faults, fleet: 3 workers,"
        f" 2 relays, 2 schedulers{' (--force)' if args.force else ''};"
        f" lease {LEASE:.0f} s",
        flush=True,
    )
    try:
        fleet.start()
        print(
            f"==> serving: {fleet.serving()}; refused by the connection budget:"
            f" {fleet.refusals()}",
            flush=True,
        )
        fleet.wait_ready(timeout=120)
        start = time.time()  # the table's clock: from the fleet being up
        window_start = datetime.now(UTC)
        enqueuer = threading.Thread(
            target=workload.run, args=(work, phase), daemon=True
        )
        enqueuer.start()
        gap = (phase - outage) / (len(faults) + 1)
        for fault in faults:
            time.sleep(gap)
            inject(fleet, fault, outage=outage, pick=fault.index)
            print(
                f"    fault {fault.index:2d}/{len(faults)} at {fault.at - start:5.0f} s:"
                f" {fault.kind} {fault.target}: {'; '.join(fault.outcome)}",
                flush=True,
            )
        enqueuer.join()
        operator = operator_answers(server)
        if work.error is not None:
            raise RuntimeError("the enqueuing thread failed") from work.error
        faults_end = time.time()
        print(
            f"==> faults done at {faults_end - start:.0f} s; {len(work.expected)} jobs"
            f" enqueued ({work.retried_waves} waves sent again); settling",
            flush=True,
        )
        settled = settle(work, deadline=LEASE * 6 + 90)
        window_end = datetime.now(UTC)
    except BaseException:  # never leave the fleet running
        fleet.stop(timeout=10)
        raise
    codes = fleet.stop(timeout=30)
    duration = time.time() - start
    print(
        f"==> {'settled' if settled else 'NOT settled'} at {duration:.0f} s;"
        f" fleet stopped (exit codes {sorted(set(codes.values()))}); checking",
        flush=True,
    )
    report = verify.check(
        expected=work.expected,
        records_dir=records,
        fleet=fleet,
        faults=faults,
        lease=LEASE,
        window=(window_start, window_end),
        sized=sized,
    )
    if sized and operator != "yes":
        # Issue 31: a fleet within the budget leaves the operators' reserve free.
        report.fail("operator refused", f"jobs stats: {operator}")
    verify.fault_outcomes(faults, verify.read_records(records), fleet)
    print()
    print(verify.table(faults, start))
    print()
    kinds = work.kinds()
    figures = {
        "jobs enqueued": f"{len(work.expected)} ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})",
        "faults injected": f"{len(faults)} ({', '.join(f'{k} {n}' for k, n in sorted(_kinds(faults).items()))})",
        "processes started": len(fleet.generations),
        "events published": work.events,
        **report.figures,
        # Issue 31: a body that finished twice (each explained above, or a violation).
        "double completions": (
            f"{report.figures.get('jobs that ran twice', 0)}"
            f" (by cause: {report.figures.get('re-runs by cause', {})});"
            f" avoidable: {report.figures.get('avoidable double completions', 0)}"
        ),
        "max_connections": args.max_connections or "server default",
        "fleet serving": fleet.serving(),
        "refused by the connection budget": fleet.refusals(),
        "operator's jobs stats answered": operator,
        "duration": f"{duration:.0f} s",
    }
    print("| figure | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    print()
    checks = [
        "lost",
        "stuck",
        "ran twice unexplained",
        "avoidable double completion",
        "operator refused",
        "cron double-fire",
        "outbox double-publish",
        "step re-run after commit",
    ]
    print("| check | violations |\n|---|---:|")
    for name in checks:
        print(f"| {name} | {len(report.violations.get(name, []))} |")
    for name in checks:
        for detail in report.violations.get(name, [])[:20]:
            print(f"  {name}: {detail}")
    print()
    print("==> PASS" if report.ok else "==> FAIL", flush=True)
    return 0 if report.ok else 1


def operator_answers(server) -> str:
    """Whether ``manage.py jobs stats`` answers while the fleet runs (issue 31: at
    max_connections = 20 the fleet used to hold every connection)."""
    import subprocess

    from tests.conftest import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_JOBS_")}
    env["DATABASE_URL"] = server.url
    try:
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "jobs", "stats", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return "no (timed out)"
    if done.returncode == 0:
        return "yes"
    return f"no ({(done.stderr.strip().splitlines() or ['?'])[-1][:120]})"


def _kinds(faults):
    from collections import Counter

    return Counter(fault.kind for fault in faults)


def settle(work, deadline: float) -> bool:
    """Wait until no chaos job is live and the outbox is empty, within ``deadline``."""
    from django.db import connection

    from ultimate_jobs.models import Job, OutboxMessage

    live = ("ready", "delayed", "running", "suspended")
    limit = time.monotonic() + deadline
    while time.monotonic() < limit:
        try:
            busy = (
                Job.objects.filter(
                    name__startswith="chaosapp.", state__in=live
                ).exists()
                or OutboxMessage.objects.filter(published_at=None).exists()
            )
        except Exception:
            connection.close()
            busy = True
        if not busy and all_present(work):
            return True
        time.sleep(0.5)
    return False


def all_present(work) -> bool:
    """Every expected job has its row, hot or moved to the archive (Q2)."""
    from ultimate_jobs.models import Job, JobArchive

    expected = list(work.expected)
    found = sum(m.objects.filter(pk__in=expected).count() for m in (Job, JobArchive))
    return found == len(expected)


if __name__ == "__main__":
    sys.exit(main())
