"""Prometheus metrics on the web process's /metrics (M1): the queue gauges are computed
at scrape time by one grouped statement, attempts are counted by queue, job and
outcome, and the label sets stay bounded whatever the input."""

from __future__ import annotations

import logging
import socket
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests import claiming
from tests.prom import Series, ours, parse, value
from tests.testapp.jobs import flaky, terminal, touch
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.observability.metrics import UNREGISTERED
from ultimate_jobs.testing.factories import JobFactory

# This package's view at /metrics, whether or not django-prometheus (whose view the
# test project serves there when installed) is: test_prometheus.py covers that one.
pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.testapp.urls")]


def scrape(client) -> Series:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(response.content.decode())


def test_queue_gauges_come_from_one_grouped_statement_at_scrape_time(
    client, jobs, django_assert_num_queries
):
    """M1: depth, oldest ready age, running and dead per queue, one statement."""
    long_ago = timezone.now() - timedelta(minutes=10)
    touch.using(queue="mq-a", run_at=long_ago).enqueue_many(
        [{"key": f"a{i}", "tenant": "t"} for i in range(3)]
    )
    touch.using(queue="mq-b").enqueue(key="b-now", tenant="t")
    touch.using(queue="mq-b", delay="1h").enqueue(key="b-later", tenant="t")
    terminal.using(queue="mq-c").enqueue(key="c-dead")
    assert [str(a.outcome) for a in jobs.run(queues=["mq-c"])] == ["dead-lettered"]
    claimed = claiming.claim(
        DjangoDatabase("default"),
        queues=["mq-b"],
        limit=5,
        worker_id="w",
        lease_seconds=30.0,
        names=None,
        now=None,
    )
    assert [row["name"] for row in claimed] == [touch.name]

    with django_assert_num_queries(1):
        series = scrape(client)

    def gauge(name, queue):
        return value(series, f"ultimate_jobs_queue_{name}", queue=queue)

    assert gauge("depth", "mq-a") == 3
    assert 600 <= gauge("oldest_ready_seconds", "mq-a") < 3600
    assert (gauge("running", "mq-a"), gauge("dead_jobs", "mq-a")) == (0, 0)
    # b-now is running; b-later is not due, so it is not waiting for a worker yet.
    assert (gauge("depth", "mq-b"), gauge("running", "mq-b")) == (0, 1)
    assert gauge("oldest_ready_seconds", "mq-b") == 0
    assert (gauge("depth", "mq-c"), gauge("dead_jobs", "mq-c")) == (0, 1)
    # A declared queue with nothing in it reads 0 rather than vanishing.
    assert ("ultimate_jobs_queue_depth", frozenset({("queue", "default")})) in series
    assert gauge("depth", "default") == 0


def test_attempts_are_counted_by_queue_job_and_outcome_with_their_durations(
    client, jobs
):
    before = scrape(client)
    touch.enqueue_many([{"key": f"t{i}", "tenant": "t"} for i in range(2)])
    flaky.enqueue(key="f", fail_times=1)
    terminal.enqueue(key="d")
    assert sorted(str(a.outcome) for a in jobs.run()) == [
        "completed",
        "completed",
        "dead-lettered",
        "retried",
    ]
    jobs.travel(seconds=11)
    assert [str(a.outcome) for a in jobs.run()] == ["completed"]
    after = scrape(client)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    total = "ultimate_jobs_jobs_total"
    assert delta(total, queue="default", job=touch.name, outcome="completed") == 2
    assert delta(total, queue="default", job=flaky.name, outcome="retried") == 1
    assert delta(total, queue="default", job=flaky.name, outcome="completed") == 1
    assert (
        delta(total, queue="default", job=terminal.name, outcome="dead-lettered") == 1
    )
    duration = "ultimate_jobs_job_duration_seconds_count"
    assert delta(duration, queue="default", job=touch.name) == 2
    assert delta(duration, queue="default", job=flaky.name) == 2
    assert delta(duration, queue="default", job=terminal.name) == 1


def test_label_sets_stay_bounded_whatever_the_input(client, jobs):
    """M1: 1,000 distinct inputs (keys and tenants) add no series."""
    touch.enqueue_many([{"key": f"warm{i}", "tenant": "t"} for i in range(3)])
    jobs.run()
    first = ours(scrape(client))
    keys = [f"input-{i}-{uuid.uuid4().hex}" for i in range(1000)]
    touch.enqueue_many([{"key": key, "tenant": key} for key in keys])
    assert len(jobs.run()) == 1000
    second = ours(scrape(client))
    assert set(second) == set(first)
    completed = {"queue": "default", "job": touch.name, "outcome": "completed"}
    total = "ultimate_jobs_jobs_total"
    assert value(second, total, **completed) - value(first, total, **completed) == 1000
    label_values = {v for _, labels in second for _, v in labels}
    assert not label_values & set(keys)


def test_a_row_naming_an_undeclared_job_is_counted_under_a_fixed_label(client, jobs):
    name = f"gone.job_{uuid.uuid4().hex}"
    JobFactory.create(name=name, idempotency_key="k", max_attempts=3)
    before = scrape(client)
    assert [str(a.outcome) for a in jobs.run()] == ["retried"]
    after = scrape(client)
    labels = {"queue": "default", "job": UNREGISTERED, "outcome": "retried"}
    total = "ultimate_jobs_jobs_total"
    assert value(after, total, **labels) - value(before, total, **labels) == 1
    assert not any(name in v for _, labels_ in after for _, v in labels_)


def test_metrics_answers_openmetrics_when_asked(client):
    response = client.get(
        "/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0"
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")
    assert response["Cache-Control"].startswith("max-age=0")
    assert client.post("/metrics").status_code == 405


@pytest.fixture
def restore_logging():
    """jobs_worker installs its default handler on the ultimate_jobs logger."""
    log = logging.getLogger("ultimate_jobs")
    handlers, level = list(log.handlers), log.level
    yield
    log.handlers[:] = handlers
    log.setLevel(level)


def test_a_bad_or_busy_metrics_port_is_refused_naming_it(restore_logging):
    with pytest.raises(CommandError, match="--metrics-port=0: a TCP port"):
        call_command("jobs_worker", "--metrics-port", "0")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"--metrics-port={port}: cannot listen"):
            call_command("jobs_worker", "--metrics-port", str(port))
