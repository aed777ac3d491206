"""Loud misconfiguration across processes (issue 30): a worker started before
``migrate`` says "run manage.py migrate" and exits non-zero; an enqueue with the app
missing from INSTALLED_APPS or on SQLite answers a coded error; every installed app's
``tasks`` module is discovered as well as its ``jobs`` module (AUTODISCOVER)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.conftest import REPO, database_url, start_deadline, wait_for
from ultimate_jobs import NO_TENANT, job
from ultimate_jobs.models import Worker

pytestmark = pytest.mark.processes

ENQUEUE = """
import django
django.setup()
from ultimate_jobs import NO_TENANT, job
from ultimate_jobs.ground.exceptions import JobsError

@job(name="probe.hello", idempotency_key=lambda p: "k", tenant=NO_TENANT)
def hello(run) -> None: ...

try:
    hello.enqueue()
except JobsError as exc:
    print(exc)
"""


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
    )


@pytest.fixture
def bare_database(django_db_setup, second_connection):
    """A database with none of the app's tables: a project before ``migrate``."""
    from django.db import connection

    name = f"{connection.settings_dict['NAME']}_bare"
    second_connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
    second_connection.execute(f'CREATE DATABASE "{name}"')
    yield database_url({**connection.settings_dict, "NAME": name})
    second_connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["jobs_worker", "jobs_relay", "jobs_scheduler"])
def test_a_process_started_before_migrate_says_so_and_exits(
    worker_env, bare_database, command
):
    ran = manage(worker_env(bare_database), command)
    assert ran.returncode == 1, ran.stderr
    assert "X_MIGRATIONS_PENDING" in ran.stderr
    assert "ultimate_jobs.0001_initial" in ran.stderr
    assert ran.stderr.rstrip().endswith("run manage.py migrate")
    assert "does not exist" not in ran.stderr + ran.stdout


@pytest.mark.django_db
def test_the_database_check_warns_until_migrate_has_run(worker_env, bare_database):
    env = worker_env(bare_database)
    before = manage(env, "check", "--database", "default")
    assert before.returncode == 0, before.stderr
    assert "ultimate_jobs.W004" in before.stderr
    assert "run manage.py migrate" in before.stderr
    migrated = manage(env, "migrate", "--no-input")
    assert migrated.returncode == 0, migrated.stderr
    after = manage(env, "check", "--database", "default")
    assert "W004" not in after.stderr + after.stdout


@pytest.mark.parametrize(
    ("mistake", "says"),
    [
        ("no-app", "X_APP_NOT_INSTALLED: 'ultimate_jobs' is not in INSTALLED_APPS"),
        ("sqlite", "X_UNSUPPORTED_DATABASE: DATABASES['default'] is sqlite"),
    ],
)
def test_an_enqueue_the_jobs_tables_cannot_take_answers_a_coded_error(mistake, says):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_misconfigured"}
    env["UJ_MISTAKE"] = mistake
    ran = subprocess.run(
        [sys.executable, "-c", ENQUEUE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(says), ran.stdout + ran.stderr


@pytest.mark.parametrize(("autodiscover", "imported"), [(None, True), ("jobs", False)])
def test_tasks_modules_are_discovered_unless_autodiscover_leaves_them_out(
    autodiscover, imported
):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    if autodiscover is not None:
        env["ULTIMATE_JOBS_AUTODISCOVER"] = autodiscover
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, django; django.setup(); "
            "print('tests.testapp.tasks' in sys.modules, "
            "'tests.testapp.jobs' in sys.modules)",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
    )
    assert ran.stdout.split() == [str(imported), "True"], ran.stderr


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_records_its_names_and_the_dashboard_names_one_it_lacks(
    start_worker, client, clean_registry
):
    """Issue 30: a job the web process declares but the running worker's code does not
    (a deploy that reached the web tier only) waits; the dashboard names it."""
    client.force_login(User.objects.create_superuser("root", password="pw"))

    @job(name="tests.web_only", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def web_only(run) -> None: ...

    web_only.enqueue()
    start_worker("--concurrency", "1", "--queues", "default")
    [row] = wait_for(lambda: list(Worker.objects.all()), message="its registry row")
    assert row.names == sorted(row.names)
    assert {"testapp.noop", "testapp.touch"} <= set(row.names)
    assert "tests.web_only" not in row.names
    page = client.get(reverse("admin:ultimate_jobs_dashboard_changelist")).content
    assert (
        "Job <code>tests.web_only</code> (queue <code>default</code>) has due jobs and "
        "none of the 1 live worker serving the queue declares it"
    ) in page.decode()
