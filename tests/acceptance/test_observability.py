"""Observability with real worker processes (M1-M3): the scrape of `jobs_worker
--metrics-port` after a scripted mix, one merged port for `--processes`, JSON log lines
carrying a request's correlation id, and readiness following a real worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import urllib.request
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.conftest import start_deadline, wait_for
from tests.prom import Series, parse, value
from tests.testapp.jobs import hold, terminal, throttled, touch
from tests.testapp.models import Record
from ultimate_jobs import api
from ultimate_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> Series:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse(response.read().decode())


def state_of(job_id):
    return Job.objects.values_list("state", "attempt").get(pk=job_id)


def samples(series: Series, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in series.items() if n == name}


def labels(**values: str) -> frozenset[tuple[str, str]]:
    return frozenset(values.items())


def test_a_scrape_after_a_scripted_mix_shows_exact_counters_and_gauges(start_worker):
    """M1, W4: done, retried, dead and a lost lease, then one scrape of the worker."""
    port = free_port()
    start_worker(
        "--queues", "default", "--concurrency", "4", "--metrics-port", str(port),
        "--prefetch", "0",  # W2: each claim takes at most the free slots
        LEASE="3s",
    )  # fmt: skip
    done = [touch.enqueue(key=f"mix-done-{i}", tenant="t") for i in range(3)]
    retried = throttled.enqueue(key="mix-retried", wait=3600)
    dead = [terminal.enqueue(key=f"mix-dead-{i}") for i in range(2)]
    lost = hold.enqueue(key="mix-lost", seconds=120)
    wait_for(lambda: all(state_of(a.id)[0] == "done" for a in done))
    wait_for(lambda: all(state_of(a.id)[0] == "dead" for a in dead))
    wait_for(lambda: state_of(retried.id) == ("delayed", 1))
    api.cancel(retried.id)  # its retry is an hour out: keep the counts still
    wait_for(lambda: Record.objects.filter(key="mix-lost", event="started").exists())
    # Another worker takes the lease (a fresh token, an hour long): this worker's next
    # heartbeat renews nothing, so it loses the lease and its write is fenced out.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ultimate_jobs_job SET lease_owner = gen_random_uuid(),"
            " lease_expires_at = now() + interval '1 hour' WHERE id = %s",
            [lost.id],
        )
    total = "ultimate_jobs_jobs_total"
    default = "default"
    wait_for(
        lambda: value(
            scrape(port), total, queue=default, job=hold.name, outcome="unowned"
        )
    )
    long_ago = timezone.now() - timedelta(minutes=10)
    touch.using(queue="parked", run_at=long_ago).enqueue_many(
        [{"key": f"parked-{i}", "tenant": "t"} for i in range(4)]
    )

    series = scrape(port)

    assert samples(series, total) == {
        labels(queue=default, job=touch.name, outcome="completed"): 3,
        labels(queue=default, job=throttled.name, outcome="retried"): 1,
        labels(queue=default, job=terminal.name, outcome="dead-lettered"): 2,
        labels(queue=default, job=hold.name, outcome="unowned"): 1,
    }
    assert samples(series, "ultimate_jobs_leases_lost_total") == {
        labels(queue=default): 1
    }
    assert samples(series, "ultimate_jobs_job_duration_seconds_count") == {
        labels(queue=default, job=touch.name): 3,
        labels(queue=default, job=throttled.name): 1,
        labels(queue=default, job=terminal.name): 2,
        labels(queue=default, job=hold.name): 1,
    }
    # Seven jobs, four slots and no prefetch: at least two claims handed rows out.
    assert value(series, "ultimate_jobs_claim_seconds_count") >= 2
    gauges = {
        name: samples(series, f"ultimate_jobs_queue_{name}")
        for name in ("depth", "running", "dead_jobs", "oldest_ready_seconds")
    }
    assert gauges["depth"][labels(queue=default)] == 0
    assert gauges["running"][labels(queue=default)] == 1  # the row the other one holds
    assert gauges["dead_jobs"][labels(queue=default)] == 2
    assert gauges["oldest_ready_seconds"][labels(queue=default)] == 0
    assert gauges["depth"][labels(queue="parked")] == 4
    assert 600 <= gauges["oldest_ready_seconds"][labels(queue="parked")] < 3600
    assert gauges["running"][labels(queue="parked")] == 0


def test_processes_serve_one_merged_port_and_keep_a_dead_childs_counts(start_worker):
    """M1 with --processes: multiprocess mode, the supervisor alone listens."""
    port = free_port()
    supervisor = start_worker(
        "--queues", "default", "--concurrency", "1", "--processes", "2",
        "--metrics-port", str(port), wait_ready=False,
    )  # fmt: skip
    try:
        wait_for(
            lambda: supervisor.log().count("jobs.worker.started") == 2,
            timeout=start_deadline(),
        )
        held = [hold.enqueue(key=f"mp-{i}", seconds=60) for i in range(2)]
        # One slot per child: the two jobs run in the two children at once.
        wait_for(lambda: Record.objects.filter(event="started").count() == 2)
        pids = set(Record.objects.values_list("pid", flat=True))
        assert len(pids) == 2
        assert supervisor.pid not in pids
        for i in range(2):
            Record.objects.create(key=f"mp-{i}", event="release")
        wait_for(lambda: all(state_of(a.id)[0] == "done" for a in held))
        total = "ultimate_jobs_jobs_total"
        completed = {"queue": "default", "outcome": "completed"}
        wait_for(lambda: value(scrape(port), total, job=hold.name, **completed) == 2)

        os.kill(pids.pop(), signal.SIGKILL)
        wait_for(
            lambda: supervisor.log().count("jobs.worker.started") == 3,
            timeout=start_deadline(),
        )
        after = touch.enqueue(key="mp-after", tenant="t")
        wait_for(lambda: state_of(after.id)[0] == "done")
        wait_for(lambda: value(scrape(port), total, job=touch.name, **completed) == 1)

        series = scrape(port)
        # The killed child's counts are kept: its files stay in the directory.
        assert value(series, total, job=hold.name, **completed) == 2
        assert value(series, total, job=touch.name, **completed) == 1
        assert (
            value(
                series,
                "ultimate_jobs_job_duration_seconds_count",
                queue="default",
                job=hold.name,
            )
            == 2
        )
        assert ("ultimate_jobs_queue_depth", labels(queue="default")) in series
        assert "Address already in use" not in supervisor.log()
    finally:
        # SIGTERM, not the fixture's SIGKILL: the supervisor forwards it to its
        # children, so none outlives a failed test.
        if supervisor.proc.poll() is None:
            supervisor.terminate()
    assert supervisor.wait() == 0


@pytest.mark.urls("tests.testapp.urls")
def test_a_requests_correlation_id_is_on_every_json_log_line_of_its_job(
    client, start_worker
):
    """M2: request header -> enqueue -> a worker's JSON log lines, all of them parse."""
    response = client.get("/chatty/e2e", HTTP_X_REQUEST_ID="lb-req-42")
    job_id = response.json()["id"]
    # -v 2: an attempt's own lines (started, a success) are DEBUG (N2).
    worker = start_worker("--concurrency", "1", "-v", "2", LOG_FORMAT="json")
    wait_for(lambda: state_of(job_id)[0] == "done")
    worker.terminate()
    assert worker.wait() == 0
    lines = [json.loads(line) for line in worker.log().splitlines() if line.strip()]
    assert "jobs.worker.started" in [line["event"] for line in lines]
    mine = [
        line
        for line in lines
        if line.get("job_id") == job_id or line["event"].startswith("testapp.chatty")
    ]
    assert [line["event"] for line in mine] == [
        "jobs.attempt.started",
        "testapp.chatty.step",
        "testapp.chatty.plain",
        "jobs.attempt.settled",
    ]
    assert {line["correlation_id"] for line in mine} == {"lb-req-42"}
    assert mine[-1]["outcome"] == "completed"


@pytest.mark.urls("tests.testapp.urls")
def test_readiness_follows_a_real_worker_and_a_stopped_one_is_not_ready(
    client, start_worker
):
    """M3: /health/ready is 503 without a worker, 200 with one, 503 once it stopped."""
    assert client.get("/health/ready").status_code == 503
    worker = start_worker("--concurrency", "1")
    wait_for(lambda: client.get("/health/ready").status_code == 200)
    assert client.get("/health/ready").json()["workers"] == {
        "live": 1,
        "slots": 1,
        "abandoned_slots": 0,
    }
    worker.terminate()
    assert worker.wait() == 0
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["problems"] == ["0 live worker(s) < min_workers 1"]
