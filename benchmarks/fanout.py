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
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Max, Min  # noqa: E402

from tests.testapp.workflow_jobs import fan_in, square  # noqa: E402
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
    parser.add_argument(
        "--plain",
        action="store_true",
        help="the baseline: the same children enqueued with no parent (enqueue_many), "
        "timed from the first child's start to the last one's finish",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job CASCADE")
    if args.plain:
        plain(args)
        return
    parent = fan_in.enqueue(
        key=f"bench-{time.time_ns()}",
        count=args.children,
        brief=True,
        batch=args.batch,
    )
    workers = start_workers(args)
    try:
        stop = time.monotonic() + args.timeout
        while time.monotonic() < stop:
            row = Job.objects.filter(pk=parent.id).values("state").first()
            if row and row["state"] in ("done", "failed", "dead", "cancelled"):
                break
            time.sleep(0.5)
        else:
            sys.exit(f"the parent did not finish within {args.timeout}s")
    finally:
        stop_workers(workers)
    report(args, parent.id)


def start_workers(
    args: argparse.Namespace, queues: str | None = None
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    only = ["--queues", queues] if queues else []
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(REPO / "manage.py"),
                "jobs_worker",
                "--concurrency",
                str(args.concurrency),
                *only,
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(30)


def plain(args: argparse.Namespace) -> None:
    key = f"plain-{time.time_ns()}"
    square.enqueue_many([{"key": key, "n": n} for n in range(args.children)])
    workers = start_workers(args)
    try:
        stop = time.monotonic() + args.timeout
        while (
            Job.objects.filter(name=square.name, state="done").count() < args.children
        ):
            if time.monotonic() > stop:
                sys.exit(f"the children did not finish within {args.timeout}s")
            time.sleep(0.5)
    finally:
        stop_workers(workers)
    times = Job.objects.filter(name=square.name).aggregate(
        first=Min("started_at"), last=Max("finished_at")
    )
    seconds = (times["last"] - times["first"]).total_seconds()
    print(
        f"baseline: {args.children} jobs with no parent, {args.workers} workers x "
        f"{args.concurrency}: first start to last finish {seconds:.2f} s "
        f"({args.children / seconds:.0f} jobs/s)"
    )


def report(args: argparse.Namespace, parent_id: Any) -> None:
    job = Job.objects.get(pk=parent_id)
    # The row's started_at is its last replay's; the first spawn's step marks the start.
    first = JobStep.objects.filter(job_id=parent_id).order_by("id").first()
    assert first is not None and first.started_at is not None
    assert job.finished_at is not None
    seconds = (job.finished_at - first.started_at).total_seconds()
    children = Job.objects.filter(parent_id=parent_id).count()
    # the children alone, comparable with --plain: first start to last finish
    span = Job.objects.filter(parent_id=parent_id).aggregate(
        first=Min("started_at"), last=Max("finished_at")
    )
    run = (span["last"] - span["first"]).total_seconds()
    assert job.result is not None, job.last_error
    assert job.result["sum"] == sum(n * n for n in range(args.children)), job.result
    print(
        f"fan-out/fan-in of {args.children} children "
        f"({f'spawn_many by {args.batch}' if args.batch else 'spawn'}), "
        f"{args.workers} workers x {args.concurrency}: parent {job.state}, {children} children, "
        f"parent start to finish {seconds:.2f} s "
        f"({args.children / seconds:.0f} children/s); the children's first start "
        f"to last finish {run:.2f} s"
    )


if __name__ == "__main__":
    main()
