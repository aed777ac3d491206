"""Do a parent's children slow down other queues (issue 28, "limits hold")? The pickup
latency of an unrelated queue's jobs (a job's claim time minus its due time, the
database's clock) is measured in three phases, with the same one worker on that queue:

* ``alone``: no other jobs;
* ``live``: a suspended parent with ``--children`` live children (ready, on a queue no
  worker serves) sits in the table;
* ``settling``: ``--kid-workers`` workers settle those children meanwhile, each settle
  running the fan-in wake trigger (migrations 0010/0012), the last one waking the parent;
* and the same settling of as many children with no parent (no trigger), as reference:
  the same workers' CPU and database load, without the wake.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB \\
        nice .venv/bin/python -m benchmarks.fanout_isolation --children 10000 --jobs 200

Each phase enqueues ``--jobs`` jobs on queue ``other``, one every ``--gap`` seconds,
and reports p50/p95/max pickup latency. The settling phase also reports how fast the
children settled, and, as a reference, the same children with no parent. The parent
and children are tests/testapp/workflow_jobs.py's ``fan_in_polling`` and ``square``;
the children are written with enqueue_many and then given the parent (the benchmark's
set-up, not run.spawn: spawning is measured by benchmarks/fanout.py). Use a database
of its own: the job tables are emptied at the start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import timedelta

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Max, Min  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.fanout import start_workers, stop_workers  # noqa: E402
from tests.testapp.workflow_jobs import fan_in_polling, square  # noqa: E402
from ultimate_jobs.models import Job, JobStep  # noqa: E402

OTHER, KIDS = "other", "kids"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--kid-workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job CASCADE")
    other = start_workers(argparse.Namespace(workers=1, concurrency=2), OTHER)
    try:
        pickups(argparse.Namespace(**{**vars(args), "jobs": 3}), "warm-up")
        report("alone", pickups(args, "alone"))
        parent = live_children(args)
        report(f"live ({args.children} children)", pickups(args, "live"))
        kids = start_workers(
            argparse.Namespace(workers=args.kid_workers, concurrency=args.concurrency),
            KIDS,
        )
        try:
            report(f"settling ({args.children} children)", pickups(args, "settling"))
            settled = wait_settled(args, parent)
        finally:
            stop_workers(kids)
        print(f"children with a parent: {settled}")
        Job.objects.filter(queue=KIDS).delete()
        live_children(args, parent=False)
        kids = start_workers(
            argparse.Namespace(workers=args.kid_workers, concurrency=args.concurrency),
            KIDS,
        )
        try:
            report(
                f"settling ({args.children} children, no parent)",
                pickups(args, "no-parent"),
            )
            print(f"the same children, no parent: {wait_settled(args, None)}")
        finally:
            stop_workers(kids)
    finally:
        stop_workers(other)


def live_children(args: argparse.Namespace, *, parent: bool = True) -> str | None:
    """``--children`` ready children on KIDS, of a suspended parent waiting for them."""
    key = f"iso-{time.time_ns()}"
    square.using(queue=KIDS).enqueue_many(
        [{"key": key, "n": n} for n in range(args.children)]
    )
    if not parent:
        return None
    # on a queue no worker serves: woken, it stays due (a run would spawn anew)
    waiting = fan_in_polling.using(queue="parents").enqueue(
        key=key, count=args.children
    )
    Job.objects.filter(pk=waiting.id).update(
        state="suspended", run_at=timezone.now() + timedelta(hours=1)
    )
    JobStep.objects.create(
        job_id=waiting.id, name="wait", kind="jobs", status="waiting", match=[]
    )
    Job.objects.filter(name=square.name, queue=KIDS).update(parent_id=waiting.id)
    return str(waiting.id)


def pickups(args: argparse.Namespace, phase: str) -> list[float]:
    """Enqueue ``--jobs`` jobs on OTHER one by one; answer each one's pickup latency."""
    ids = []
    for n in range(args.jobs):
        ids.append(square.using(queue=OTHER).enqueue(key=phase, n=n).id)
        time.sleep(args.gap)
    stop = time.monotonic() + args.timeout
    rows = Job.objects.filter(pk__in=ids)
    while rows.filter(state="done").count() < len(ids):
        if time.monotonic() > stop:
            raise SystemExit(f"{phase}: the jobs on {OTHER!r} did not finish")
        time.sleep(0.2)
    return [
        (started - due).total_seconds()
        for started, due in rows.values_list("started_at", "run_at")
    ]


def wait_settled(args: argparse.Namespace, parent: str | None) -> str:
    kids = Job.objects.filter(name=square.name, queue=KIDS)
    stop = time.monotonic() + args.timeout
    while kids.filter(state="done").count() < args.children:
        if time.monotonic() > stop:
            raise SystemExit("the children did not finish")
        time.sleep(0.5)
    times = kids.aggregate(first=Min("started_at"), last=Max("finished_at"))
    seconds = (times["last"] - times["first"]).total_seconds()
    text = (
        f"{args.children} settled in {seconds:.1f} s ({args.children / seconds:.0f}/s)"
    )
    if parent is not None:
        woken = Job.objects.filter(pk=parent, run_at__lte=timezone.now()).exists()
        text += f", parent woken: {woken}"
    return text


def report(phase: str, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    print(
        f"{phase}: pickup on {OTHER!r} p50 {statistics.median(ordered) * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms ({len(ordered)} jobs)"
    )


if __name__ == "__main__":
    main()
