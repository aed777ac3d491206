"""One registry for every exporter (M1, issue 16): the app's collectors join
prometheus_client's default registry when the app is ready, so django-prometheus's
``/metrics`` (the optional extra ``ultimate-jobs[prometheus]``) answers Django's series
and the queue's in one scrape, and ``jobs_worker --metrics-port`` serves that same
registry, with ``--processes`` too. The django-prometheus tests run where it is
installed (CI's second leg: Python 3.11, Django 5.2) and are skipped elsewhere."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import REPO, wait_for
from tests.prom import Series, parse, value
from tests.testapp.jobs import hold, noop, touch
from tests.testapp.models import Record
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db

TOTAL = "ultimate_jobs_jobs_total"
BY_METHOD = "django_http_requests_total_by_method_total"
NEW_CONNECTIONS = "django_db_new_connections_total"
EXECUTED = "django_db_execute_total"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape_port(port: int) -> Series:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse(response.read().decode())


def exposition_of_a_fresh_process(env: dict[str, str], code: str) -> Series:
    """What ``code`` prints (an exposition) in a new process after django.setup()."""
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return parse(done.stdout)


def test_the_collectors_join_the_default_registry_when_the_app_is_ready(worker_env):
    """Before any URLconf or worker imports the metrics module: an exporter of the
    default registry that is not this package's (django-prometheus's) serves them."""
    series = exposition_of_a_fresh_process(
        worker_env(),
        "import sys\n"
        "from prometheus_client import REGISTRY, generate_latest\n"
        "assert 'ultimate_jobs.views' not in sys.modules\n"
        "print(generate_latest(REGISTRY).decode())\n",
    )
    assert ("ultimate_jobs_queue_depth", frozenset({("queue", "default")})) in series
    assert value(series, "ultimate_jobs_queue_depth", queue="default") == 0
    assert ("ultimate_jobs_claim_seconds_count", frozenset()) in series


def test_without_django_prometheus_the_testproject_serves_this_package_view(settings):
    if "django_prometheus" in settings.INSTALLED_APPS:
        pytest.skip("django-prometheus is installed: /metrics is its view")
    from django.urls import resolve

    from ultimate_jobs.views import metrics

    assert resolve("/metrics").func is metrics


# -- with django-prometheus (the extra ultimate-jobs[prometheus]) ----------------------


@pytest.mark.urls("testproject.urls")
def test_one_scrape_of_django_prometheus_metrics_has_django_and_queue_series(
    client, jobs
):
    pytest.importorskip("django_prometheus")
    from django.urls import resolve
    from django_prometheus.exports import ExportToDjangoView

    assert resolve("/metrics").func is ExportToDjangoView

    def scrape() -> Series:
        response = client.get("/metrics")
        assert response.status_code == 200
        return parse(response.content.decode())

    touch.using(queue="parked").enqueue_many(
        [{"key": f"prom-parked-{i}", "tenant": "t"} for i in range(3)]
    )
    before = scrape()
    assert client.get("/health/ready").status_code == 503  # no worker is alive
    noop.enqueue(key="prom-web-2")
    [attempt] = jobs.run(queues=["default"])
    assert str(attempt.outcome) == "completed"

    after = scrape()

    completed = {"queue": "default", "job": noop.name, "outcome": "completed"}
    # Django's series: the readiness request and this scrape, counted by the
    # middleware of the same process.
    assert (
        value(after, BY_METHOD, method="GET") - value(before, BY_METHOD, method="GET")
        == 2
    )
    # The queue's: counters moved by the runner in this process, gauges read now.
    assert value(after, TOTAL, **completed) - value(before, TOTAL, **completed) == 1
    assert value(after, "ultimate_jobs_queue_depth", queue="parked") == 3
    assert value(after, "ultimate_jobs_queue_depth", queue="default") == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
def test_the_worker_port_serves_the_registry_django_prometheus_exports(start_worker):
    """The worker's process registers django-prometheus's series too (here its
    database backend's, moved by the worker's Django connections): one port, one
    registry, Django's series and the queue's in one scrape."""
    pytest.importorskip("django_prometheus")
    port = free_port()
    start_worker("--queues", "default", "--metrics-port", str(port))
    answer = touch.enqueue(key="prom-worker", tenant="t")
    wait_for(
        lambda: Job.objects.get(pk=answer.id).state == "done",
        message="the job to complete in the worker",
    )
    completed = {"queue": "default", "job": touch.name, "outcome": "completed"}
    wait_for(lambda: value(scrape_port(port), TOTAL, **completed) == 1)

    first = scrape_port(port)
    second = scrape_port(port)

    db = {"alias": "default", "vendor": "postgresql"}
    # Each scrape reads the queue gauges on a fresh Django connection of the server's
    # thread (closed after it, CONN_MAX_AGE = 0): django-prometheus counts it.
    assert (
        value(second, NEW_CONNECTIONS, **db) - value(first, NEW_CONNECTIONS, **db) == 1
    )
    # The job's body wrote its Record through the ORM, on Django's connection.
    assert value(second, EXECUTED, **db) >= 1
    assert value(second, TOTAL, **completed) == 1
    assert value(second, "ultimate_jobs_queue_depth", queue="default") == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
def test_processes_merge_django_prometheus_series_of_every_child(start_worker):
    """--processes: the children write django-prometheus's counters to the
    multiprocess files beside the queue's, the supervisor serves the merge (and
    registers nothing twice)."""
    pytest.importorskip("django_prometheus")
    port = free_port()
    supervisor = start_worker(
        "--queues", "default", "--concurrency", "1", "--processes", "2",
        "--metrics-port", str(port), wait_ready=False,
    )  # fmt: skip
    try:
        wait_for(lambda: supervisor.log().count("jobs.worker.started") == 2)
        db = {"alias": "default", "vendor": "postgresql"}
        before = value(scrape_port(port), EXECUTED, **db)
        held = [hold.enqueue(key=f"prom-mp-{i}", seconds=60) for i in range(2)]
        wait_for(lambda: Record.objects.filter(event="started").count() == 2)
        assert len(set(Record.objects.values_list("pid", flat=True))) == 2
        for i in range(2):
            Record.objects.create(key=f"prom-mp-{i}", event="release")
        wait_for(lambda: all(Job.objects.get(pk=a.id).state == "done" for a in held))
        completed = {"queue": "default", "job": hold.name, "outcome": "completed"}
        wait_for(lambda: value(scrape_port(port), TOTAL, **completed) == 2)

        series = scrape_port(port)

        # Each body ran at least three statements on Django's connection in its child
        # (INSERT "started", a SELECT that saw "release", INSERT "finished"): the merge
        # sums both children's.
        assert value(series, EXECUTED, **db) - before >= 6
        assert value(series, TOTAL, **completed) == 2
        assert "Duplicated timeseries" not in supervisor.log()
    finally:
        # SIGTERM, not the fixture's SIGKILL: the supervisor forwards it to its
        # children, so none outlives a failed test.
        if supervisor.proc.poll() is None:
            supervisor.terminate()
    assert supervisor.wait(30) == 0
