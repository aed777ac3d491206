"""Fan-out and fan-in (S10, S11): one parent spawns ``--children`` children with
``run.spawn``, waits for them with ``run.wait_for_jobs``, and the figure is the time
from the parent's start to its finish (its first spawn's started_at to the row's
finished_at, the database's clock), with ``--workers`` worker processes of ``--concurrency`` slots.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB \\
        .venv/bin/python -m benchmarks.fanout --children 10000 --workers 3 --concurrency 4
        .venv/bin/python -m benchmarks.fanout --children 10000 --batch 500

The parent and children are tests/testapp/workflow_jobs.py's ``fan_in`` and ``square``
(a child returns n*n, kept with store_result=True), so the settings are tests.settings.
Use a database of its own: the job tables are emptied at the start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from tests.testapp.workflow_jobs import fan_in  # noqa: E402
from ultimate_jobs.models import Job, JobStep  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        help="spawn with run.spawn_many, this many children a transaction (0: run.spawn)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job CASCADE")
    parent = fan_in.enqueue(
        key=f"bench-{time.time_ns()}", count=args.children, brief=True
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(REPO / "manage.py"),
                "jobs_worker",
                "--concurrency",
                str(args.concurrency),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]
    try:
        stop = time.monotonic() + args.timeout
        while time.monotonic() < stop:
            row = (
                Job.objects.filter(pk=parent.id)
                .values("state", "started_at", "finished_at")
                .first()
            )
            if row and row["state"] in ("done", "failed", "dead", "cancelled"):
                break
            time.sleep(0.5)
        else:
            sys.exit(f"the parent did not finish within {args.timeout}s")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(30)
    job = Job.objects.get(pk=parent.id)
    # The row's started_at is its last replay's; the first spawn's step marks the start.
    first = JobStep.objects.filter(job_id=parent.id).order_by("id").first()
    assert first is not None and first.started_at is not None
    assert job.finished_at is not None
    seconds = (job.finished_at - first.started_at).total_seconds()
    children = Job.objects.filter(parent_id=parent.id).count()
    assert job.result is not None, job.last_error
    assert job.result["sum"] == sum(n * n for n in range(args.children)), job.result
    print(
        f"fan-out/fan-in of {args.children} children "
        f"({f'spawn_many by {args.batch}' if args.batch else 'spawn'}), "
        f"{args.workers} workers x {args.concurrency}: parent {job.state}, {children} children, "
        f"parent start to finish {seconds:.2f} s "
        f"({args.children / seconds:.0f} children/s)"
    )


if __name__ == "__main__":
    main()
