"""What a worker process imports (N2: RSS at most 50 MiB at concurrency 16).

A ``jobs_worker`` that serves no metrics, in a project with no exporter, runs its jobs
without loading prometheus_client (1.2 MiB and 30 modules of its RSS): the metrics of
M1 are tallied by ultimate_jobs/observability/metrics.py and join prometheus_client's
default registry the moment anything imports it, with what was counted so far. Nor does
it load what only the web side or other commands use (the admin, the MCP server,
exports, webhooks, backfills, the exposition server), nor django.tasks for a bridge
job it does not run, nor croniter when it does not lead the scheduler. A later import
that pulls one of them back into every worker fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import django
import pytest

from tests.conftest import REPO
from ultimate_jobs.observability.metrics import DURATION_BUCKETS


def answer_of(script: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter from the repository; its last line of
    output, as JSON (the process must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Loaded by no worker that exports nothing: each was imported by one before (the
# first three by apps.py and the jobs_worker command, issue 26), or is the web's.
NEVER_IN_A_WORKER = [
    "prometheus_client",
    "ultimate_jobs.observability.registered",
    "ultimate_jobs.observability.exposition",
    "wsgiref",
    "ultimate_jobs.admin",
    "ultimate_jobs.agents",
    "ultimate_jobs.views",
    "ultimate_jobs.exports",
    "ultimate_jobs.webhooks",
    "ultimate_jobs.backfills",
    # The django.tasks bridge job is declared by ultimate_jobs.jobs; its body loads
    # django.tasks (0.2 MiB) when a bridge job runs or settles (issue 26).
    "ultimate_jobs.backend",
    "django.tasks",
    "django_tasks",
]
# On Django 5.2 the `django-tasks` backport imports django_stubs_ext, whose patch
# imports the admin itself: not this app's import, so checked where Django has
# `django.tasks` built in.
if django.VERSION >= (6, 0):
    NEVER_IN_A_WORKER.append("django.contrib.admin")

# Run in the worker's process: one job enqueued, the worker started as manage.py
# starts it (checks included) and stopped after that job; then which of the modules
# above it loaded, and, once prometheus_client is imported, what its registry serves.
SCRIPT = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from ultimate_jobs.jobs import purge_tables

purge_tables.enqueue()
try:
    call_command("jobs_worker", "--concurrency", "16", "--max-jobs", "1")
except SystemExit:
    pass
loaded = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)

from prometheus_client import REGISTRY

served = {
    (s.name, tuple(sorted(s.labels.items()))): s.value
    for family in REGISTRY.collect()
    if family.name.startswith("ultimate_jobs_") and "queue" not in family.name
    for s in family.samples
    if not s.name.endswith("_created")
}
print(json.dumps({"loaded": loaded, "served": [[k[0], k[1], v] for k, v in served.items()]}))
"""


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_exports_nothing_never_loads_prometheus_client(worker_env):
    env = worker_env() | {"DJANGO_SETTINGS_MODULE": "tests.settings_lean"}
    answer = answer_of(SCRIPT, env, json.dumps(NEVER_IN_A_WORKER))
    assert answer["loaded"] == []
    served = {
        (name, tuple(map(tuple, labels))): v for name, labels, v in answer["served"]
    }
    # M1: what the worker counted before prometheus_client was imported is served.
    attempt = (
        ("job", "ultimate_jobs.purge"),
        ("outcome", "completed"),
        ("queue", "default"),
    )
    assert served[("ultimate_jobs_jobs_total", attempt)] == 1.0
    duration = (("job", "ultimate_jobs.purge"), ("queue", "default"))
    assert served[("ultimate_jobs_job_duration_seconds_count", duration)] == 1.0
    took = served[("ultimate_jobs_job_duration_seconds_sum", duration)]
    assert took > 0.0
    # The one observation is in every bucket from the first bound at or above it.
    buckets = {
        dict(labels)["le"]: v
        for (name, labels), v in served.items()
        if name == "ultimate_jobs_job_duration_seconds_bucket"
    }
    assert len(buckets) == len(DURATION_BUCKETS) + 1
    assert buckets == {
        **{repr(float(b)): float(took <= b) for b in DURATION_BUCKETS},
        "+Inf": 1.0,
    }
    claims = served[("ultimate_jobs_claim_seconds_count", ())]
    assert claims >= 1.0
    assert served[("ultimate_jobs_claim_seconds_bucket", (("le", "+Inf"),))] == claims


# Every kind of record before prometheus_client is imported, then the same again after:
# the series must read exactly twice what they read once the tallies were added, so
# the tallies hold what prometheus_client itself would have counted.
RECORDS = """
import json, sys
import django
django.setup()
from ultimate_jobs.observability import metrics

def record():
    for n, seconds in enumerate([0.0, 0.004, 0.005, 0.7, 31.0, 9999.0, -1.0]):
        job = {"queue": "q%d" % (n % 2), "name": "undeclared", "state": "dead"}
        metrics.attempt_finished(job, "completed" if n % 3 else "retried", seconds)
        metrics.claim_finished(seconds / 1000)
        metrics.job_buried(job if n % 2 else {**job, "state": "ready"})
        metrics.lease_lost(job["queue"])
        metrics.row_unreadable("ultimate_jobs_job", n)
        metrics.body_abandoned(job["queue"], "undeclared")
    # A batch of completions reported at once (the acks, N2).
    metrics.attempts_finished("q1", "undeclared", "completed", [0.0, 0.7, 31.0, -1.0])

def served():
    from prometheus_client import REGISTRY
    return {
        s.name + json.dumps(sorted(s.labels.items())): s.value
        for family in REGISTRY.collect()
        if family.name.startswith("ultimate_jobs_") and "queue_" not in family.name
        for s in family.samples
        if not s.name.endswith("_created")
    }

record()
before = "prometheus_client" in sys.modules
import prometheus_client
once = served()
record()
print(json.dumps({"before": before, "once": once, "twice": served()}))
"""


def test_what_was_tallied_before_prometheus_client_is_what_it_would_have_counted():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_lean"}
    env.setdefault("DATABASE_URL", "postgres://unused@127.0.0.1:1/unused")
    answer = answer_of(RECORDS, env)
    assert answer["before"] is False
    once, twice = answer["once"], answer["twice"]
    assert set(once) == set(twice)
    assert {k: 2 * v for k, v in once.items()} == pytest.approx(twice)
    names = {key.partition("[")[0] for key, v in once.items() if v}
    assert names == {
        "ultimate_jobs_jobs_total",
        "ultimate_jobs_job_duration_seconds_bucket",
        "ultimate_jobs_job_duration_seconds_count",
        "ultimate_jobs_job_duration_seconds_sum",
        "ultimate_jobs_claim_seconds_bucket",
        "ultimate_jobs_claim_seconds_count",
        "ultimate_jobs_claim_seconds_sum",
        "ultimate_jobs_leases_lost_total",
        "ultimate_jobs_rows_unreadable_total",
        "ultimate_jobs_bodies_abandoned_total",
    }


# A worker that is not the scheduler never evaluates a cron: the app's own hourly purge
# task is declared (and its cron checked) in every process, croniter and dateutil
# (0.5 MiB) load with the first evaluation only. The refusals of a bad cron at
# declaration are unchanged: tests/unit/test_cron.py.
NO_CRON = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from ultimate_jobs.jobs import purge_hourly, purge_tables
from ultimate_jobs.scheduling.tasks import task
from ultimate_jobs.ground.exceptions import InvalidCron

purge_tables.enqueue()
call_command("check")
try:
    task(cron="61 0 * * *", tz="UTC")  # refused where it is written, without croniter
    refused = ""
except InvalidCron as exc:
    refused = str(exc)
try:
    call_command(
        "jobs_worker", "--concurrency", "16", "--max-jobs", "1", "--roles", "worker"
    )
except SystemExit:
    pass
loaded = sorted(m for m in ("croniter", "dateutil") if m in sys.modules)
purge_hourly.next_run()  # the first evaluation loads it
print(json.dumps({"loaded": loaded, "refused": refused, "after": "croniter" in sys.modules}))
"""


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_is_not_the_scheduler_never_loads_croniter(worker_env):
    env = worker_env() | {"DJANGO_SETTINGS_MODULE": "tests.settings_lean"}
    answer = answer_of(NO_CRON, env)
    assert answer["loaded"] == []
    assert "out of range" in answer["refused"]
    assert answer["after"] is True
