"""Server time of every admin page with a million jobs (P7: each under 300 ms).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB \\
        .venv/bin/python -m benchmarks.admin_pages --jobs 1000000

Migrates the database DATABASE_URL names, fills it once with ``--jobs`` rows (a spread
of states, queues, names and tenants over 30 days, five percent dead with kept
attempts and three causes of failure, a day of per-minute counters), moves the finished
jobs older than ``--archive-after-days`` to the archive with the leader's mover (so the
mix is ready, delayed, running and recent finished jobs hot, older finished ones
archived), ANALYZEs, then asks each admin page through
Django's test client in this process: the time is the server's (routing, queries,
templates), no network and no browser. Each page is asked once to warm up, then
``--rounds`` times; the table shows the median and the slowest, and how many SQL
statements the page ran. A page is a URL an operator opens: lists, filters, searches,
the second keyset page, a job's detail, the dashboard.

Use a database of its own (never one the tests or CI use): the rows stay for the next
run, which skips the fill when the table already holds ``--jobs`` rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

FILL = """
INSERT INTO ultimate_jobs_job (
    id, run_id, name, queue, priority, state, input, tenant_id, idempotency_key,
    attempt, max_attempts, run_at, created_at, started_at, finished_at, worker_id,
    last_error, error_code, stop_reason, correlation_id, lease_expires_at
)
SELECT
    -- A UUIDv7 shape: the creation time in milliseconds, then hash bits (H5).
    (lpad(to_hex(ms), 12, '0') || '7' || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid,
    md5('run' || g)::uuid,
    names[1 + g %% array_length(names, 1)],
    queues[1 + g %% array_length(queues, 1)],
    0,
    state,
    jsonb_build_object('key', 'key-' || g, 'n', g),
    't' || (g %% 1000),
    'key-' || g,
    CASE WHEN state IN ('ready', 'delayed') THEN 0 ELSE 1 + g %% 3 END,
    5,
    created + interval '1 second',
    created,
    CASE WHEN state IN ('ready', 'delayed') THEN NULL ELSE created + interval '2 seconds' END,
    CASE WHEN state IN ('done', 'dead', 'failed', 'cancelled')
         THEN created + interval '3 seconds' END,
    CASE WHEN state IN ('ready', 'delayed') THEN '' ELSE 'bench-worker' END,
    CASE WHEN state IN ('dead', 'failed')
         THEN (ARRAY['builtins.RuntimeError: boom ', 'builtins.KeyError: order ',
                     'builtins.TimeoutError: gateway timed out after '])[1 + g %% 3]
              || g || E'\\nTraceback (most recent call last):\\n'
              || '  File "/srv/app/jobs.py", line ' || (10 + g %% 3) || ', in body'
         ELSE '' END,
    '',
    CASE WHEN state = 'dead' THEN 'attempts-exhausted' ELSE '' END,
    CASE WHEN g %% 50 = 0 THEN 'task:nightly@' || to_char(created, 'YYYY-MM-DD') ELSE '' END,
    CASE WHEN state = 'running' THEN now() + interval '1 hour' END
  FROM (
        SELECT g,
               md5(g::text) AS h,
               (extract(epoch FROM now() - interval '30 days') * 1000)::bigint
                   + g * ((30::bigint * 86400 * 1000) / %(jobs)s::bigint) AS ms,
               CASE
                   WHEN g %% 100 < 85 THEN 'done'
                   WHEN g %% 100 < 90 THEN 'dead'
                   WHEN g %% 100 < 92 THEN 'failed'
                   WHEN g %% 100 < 94 THEN 'cancelled'
                   WHEN g %% 100 < 97 THEN 'ready'
                   WHEN g %% 100 < 99 THEN 'delayed'
                   ELSE 'running'
               END AS state,
               ARRAY['testapp.noop', 'testapp.touch', 'testapp.flaky', 'testapp.terminal',
                     'testapp.anything', 'testapp.summed', 'testapp.three_steps',
                     'testapp.onboard', 'testapp.hold', 'testapp.capped'] AS names,
               ARRAY['default', 'mail', 'reports', 'billing'] AS queues
          FROM generate_series(1, %(jobs)s::bigint) AS g
       ) AS spread
 CROSS JOIN LATERAL (
        SELECT to_timestamp(spread.ms / 1000.0) AS created
       ) AS at
"""

ATTEMPTS = """
INSERT INTO ultimate_jobs_attempt
       (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome, error)
SELECT job.id, job.run_id, n, 'bench-worker', job.started_at, job.started_at,
       'retried', 'builtins.RuntimeError: boom'
  FROM ultimate_jobs_job AS job
 CROSS JOIN generate_series(1, 2) AS n
 WHERE job.state = 'dead'
"""

COUNTERS = """
INSERT INTO ultimate_jobs_counter (name, tier, bucket, done, retried, failed, dead, duration)
SELECT name, 60, date_trunc('minute', now()) - make_interval(mins => m),
       50 + mod(m, 7), mod(m, 5), mod(m, 3), mod(m, 2), 12.5
  FROM generate_series(0, 1439) AS m
 CROSS JOIN unnest(ARRAY['testapp.noop', 'testapp.touch', 'testapp.flaky',
                         'testapp.terminal', 'testapp.anything']) AS name
    ON CONFLICT (name, tier, bucket) DO NOTHING
"""


def archive(older_than_days: float) -> int:
    """Move every finished job older than ``older_than_days`` to the archive with the
    leader's own mover (maintenance/archive.py), as ARCHIVE_AFTER would have."""
    from ultimate_jobs.db import DjangoDatabase
    from ultimate_jobs.maintenance.archive import move

    started = time.monotonic()
    moved = 0
    while True:
        done = move(
            DjangoDatabase("default"),
            after=older_than_days * 86400,
            batch=5000,
            max_batches=20,
        )
        moved += done.moved
        if not done.full:
            break
    print(
        f"==> moved {moved} finished jobs to the archive in "
        f"{time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return moved


def fill(jobs: int) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ultimate_jobs_job)"
            " + (SELECT count(*) FROM ultimate_jobs_job_archive)"
        )
        have = cursor.fetchone()[0]
        if have >= jobs:
            print(f"==> {have} jobs already there: no fill", file=sys.stderr)
            return
        print(f"==> filling {jobs} jobs (once; a few minutes)", file=sys.stderr)
        started = time.monotonic()
        cursor.execute("TRUNCATE ultimate_jobs_job CASCADE")
        cursor.execute(
            "TRUNCATE ultimate_jobs_job_archive, ultimate_jobs_archive_count"
        )
        cursor.execute("DELETE FROM ultimate_jobs_counter")
        cursor.execute(FILL, {"jobs": jobs})
        cursor.execute(ATTEMPTS)
        cursor.execute(COUNTERS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"==> filled in {time.monotonic() - started:.0f} s", file=sys.stderr)


def pages() -> list[tuple[str, str]]:
    """(label, path) of every page timed; ids read from the filled table."""
    from ultimate_jobs.models import Job

    newest = Job.objects.order_by("-id").values_list("id", flat=True)[:200]
    newest = list(newest)
    dead = (
        Job.objects.filter(state="dead").order_by("-id").values_list("id", flat=True)[0]
    )
    base = "/admin/ultimate_jobs"
    return [
        ("admin index", "/admin/"),
        ("app index", f"{base}/"),
        ("dashboard and queues", f"{base}/dashboard/"),
        ("jobs, newest page", f"{base}/job/"),
        ("jobs, second page (keyset)", f"{base}/job/?after={newest[99]}"),
        ("jobs, a page back (keyset)", f"{base}/job/?before={newest[150]}"),
        ("jobs, state=dead (both tables)", f"{base}/job/?state=dead"),
        ("jobs, queue=mail&state=dead", f"{base}/job/?queue=mail&state=dead"),
        ("archive, newest page", f"{base}/jobarchive/"),
        ("archive, state=dead", f"{base}/jobarchive/?state=dead"),
        ("jobs, state=running", f"{base}/job/?state=running"),
        ("jobs, queue=mail", f"{base}/job/?queue=mail"),
        ("jobs, name=testapp.flaky", f"{base}/job/?name=testapp.flaky"),
        ("jobs, tenant=t42", f"{base}/job/?tenant=t42"),
        (
            "jobs, created range",
            f"{base}/job/?created_from=2000-01-01&created_to=2100-01-01",
        ),
        ("jobs, search key (?q=key-4242)", f"{base}/job/?q=key-4242"),
        ("jobs, search tenant (?q=t42)", f"{base}/job/?q=t42"),
        ("jobs, search id prefix", f"{base}/job/?q=id:{str(dead)[:8]}"),
        ("jobs, search full id", f"{base}/job/?q={dead}"),
        ("jobs, fired by a task", f"{base}/job/?fired_by=task:nightly"),
        ("job detail (dead, 3 attempts)", f"{base}/job/{dead}/change/"),
        ("workers", f"{base}/worker/"),
        ("task fires", f"{base}/taskwatermark/"),
        ("schedules", f"{base}/schedule/"),
        ("queue pauses", f"{base}/queuepause/"),
        ("job counters", f"{base}/jobcounter/"),
        ("manifest", f"{base}/declaredjob/"),
        ("backfill ledger", f"{base}/backfillledger/"),
        ("webhook deliveries", f"{base}/webhookdelivery/"),
    ]


def measure(rounds: int) -> list[dict[str, Any]]:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = User.objects.filter(username="bench-admin").first()
    if user is None:
        user = User.objects.create_superuser("bench-admin", "b@example.com", "x")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(user)
    results = []
    for label, path in pages():
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        times = []
        for _ in range(rounds):
            reset_queries()
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                answer = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, (path, answer.status_code)
        results.append(
            {
                "page": label,
                "path": path,
                "median_ms": statistics.median(times),
                "max_ms": max(times),
                "queries": len(queries.captured_queries),
            }
        )
        print(f"{label:<34} {statistics.median(times):7.1f} ms", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.admin_pages")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="rows to fill")
    parser.add_argument("--rounds", type=int, default=5, help="timed asks per page")
    parser.add_argument("--no-fill", action="store_true", help="time what is there")
    parser.add_argument(
        "--archive-after-days",
        type=float,
        default=3.0,
        help="move finished jobs older than this to the archive (the mix: ready, "
        "delayed, running and recent finished hot; older finished archived)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    if not args.no_fill:
        fill(args.jobs)
        archive(args.archive_after_days)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM ultimate_jobs_job")
        hot = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM ultimate_jobs_job_archive")
        archived = cursor.fetchone()[0]
        cursor.execute(
            "SELECT state, count(*) FROM ultimate_jobs_job GROUP BY 1 ORDER BY 1"
        )
        states = ", ".join(f"{n} {state}" for state, n in cursor.fetchall())
        cursor.execute(
            "SELECT count(*) FROM ultimate_jobs_job_archive WHERE state = 'dead'"
        )
        archived_dead = cursor.fetchone()[0]
    total = hot + archived
    results = measure(args.rounds)
    print(
        f"\n{total} jobs: {hot} in the hot table ({states}), {archived} in the "
        f"archive ({archived_dead} dead); median and slowest of {args.rounds} asks, "
        "server time\n"
    )
    print("| page | median | slowest | SQL statements |")
    print("|---|---:|---:|---:|")
    for row in results:
        print(
            f"| {row['page']} | {row['median_ms']:.0f} ms | {row['max_ms']:.0f} ms "
            f"| {row['queries']} |"
        )
    over = [r["page"] for r in results if r["median_ms"] >= 300]
    print(f"\nover 300 ms: {', '.join(over) if over else 'none'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
