"""The smaller hardening items of issue 14, defect 7 (B1, T, M2, M3).

* a tenant id with a newline forged log lines in the text format: control characters
  are escaped, one record is one line;
* a ``--worker-id`` longer than its column started a worker that could never claim;
* a non-JSON ``ULTIMATE_JOBS_RETENTION`` or a non-dict ``ULTIMATE_JOBS`` gave a
  traceback instead of a system check error;
* a misspelled ``ULTIMATE_JOBS_*`` variable was silently ignored;
* ``/health/ready`` showed the database's error text (host, port) to anyone.

(A body that ignores its timeout: tests/acceptance/test_hardening_processes.py.)
"""

from __future__ import annotations

import io
import logging
import sys

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from ultimate_jobs import ConfigurationError, InvalidArgument, QueryError
from ultimate_jobs.checks import check_settings, check_variables
from ultimate_jobs.conf import load_settings
from ultimate_jobs.observability.logs import JsonFormatter, KeyValueFormatter
from ultimate_jobs.runtime.worker import Worker


def record(message: str, **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord(
        "ultimate_jobs.x", logging.INFO, "f.py", 1, message, (), None
    )
    entry.__dict__.update(extra)
    return entry


def test_a_text_log_line_cannot_be_forged_by_a_value():
    forged = "acme\n2026-12-01 12:00:00,000 ERROR jobs.attempt.failed job_id=evil"
    line = KeyValueFormatter("%(levelname)s %(message)s").format(
        record("jobs.enqueued\r\x1b[31m", tenant_id=forged, job_name="a\tb")
    )
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    # Values are quoted as logfmt does (issue 31): the forged "job_id=evil" stays
    # inside tenant_id's quotes, its escaped newline escaped once more.
    assert line == (
        "INFO jobs.enqueued\\r\\x1b[31m "
        'tenant_id="acme\\\\n2026-12-01 12:00:00,000 ERROR jobs.attempt.failed '
        'job_id=evil" job_name="a\\\\tb"'
    )
    # A traceback still follows on its own lines, after the fields.
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failed = record("jobs.attempt.failed", job_id="j1")
        failed.exc_info = sys.exc_info()
    text = KeyValueFormatter("%(message)s").format(failed)
    assert text.splitlines()[0] == "jobs.attempt.failed job_id=j1"
    assert text.splitlines()[-1] == "RuntimeError: boom"
    # The JSON format was never affected: the newline is inside a JSON string.
    assert "\n" not in JsonFormatter().format(record("x", tenant_id=forged))


@pytest.mark.django_db
def test_a_worker_id_longer_than_its_column_is_refused():
    with pytest.raises(InvalidArgument) as info:
        Worker(worker_id="w" * 201)
    assert info.value.field == "worker_id"
    with pytest.raises(CommandError, match="--worker-id"):
        call_command("jobs_worker", "--worker-id", "w" * 201)
    with pytest.raises(CommandError, match="NUL"):
        call_command("jobs_worker", "--worker-id", "w\x00")
    assert Worker(worker_id="w" * 200).worker_id == "w" * 200
    assert len(Worker().worker_id) <= 200


def test_a_non_json_retention_variable_is_a_check_error(monkeypatch, settings):
    with pytest.raises(ConfigurationError) as info:
        load_settings({}, {"ULTIMATE_JOBS_RETENTION": "{not json"})
    assert info.value.key == "RETENTION"
    monkeypatch.setenv("ULTIMATE_JOBS_RETENTION", "{not json")
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E002"
    assert "ULTIMATE_JOBS_RETENTION is not JSON" in error.msg


@pytest.mark.parametrize("value", [["LEASE", "30s"], "LEASE=30s", 42])
def test_a_non_dict_ultimate_jobs_is_a_check_error(settings, value):
    settings.ULTIMATE_JOBS = value
    with pytest.raises(ConfigurationError):
        load_settings(value)
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E002"
    assert "expected a dict of settings" in error.msg


def test_a_misspelled_variable_is_warned_with_the_closest_key(monkeypatch):
    monkeypatch.setenv("ULTIMATE_JOBS_CONCURENCY", "16")
    monkeypatch.setenv("ULTIMATE_JOBS_LEASE", "40s")  # a real one: no warning
    monkeypatch.setenv("ULTIMATE_JOBS_ZZZ", "1")
    warnings = check_variables()
    assert [(w.id, w.msg) for w in warnings] == [
        (
            "ultimate_jobs.W001",
            "environment variable ULTIMATE_JOBS_CONCURENCY names no setting: "
            "did you mean ULTIMATE_JOBS_CONCURRENCY?",
        ),
        (
            "ultimate_jobs.W001",
            "environment variable ULTIMATE_JOBS_ZZZ names no setting",
        ),
    ]
    out = io.StringIO()
    call_command("check", stdout=out, stderr=out)
    assert "did you mean ULTIMATE_JOBS_CONCURRENCY?" in out.getvalue()


@pytest.mark.django_db
def test_readiness_shows_no_database_error_text_to_an_anonymous_caller(
    client, monkeypatch
):
    """The real error of a refused connection, raised where the readiness read runs."""
    try:
        psycopg.connect("host=127.0.0.1 port=1 user=nobody dbname=x connect_timeout=2")
    except psycopg.OperationalError as exc:
        refused = QueryError("queue_health", exc)
    else:  # pragma: no cover - nothing listens on port 1
        pytest.fail("port 1 accepted a connection")

    def unreachable(*args, **kwargs):
        raise refused

    monkeypatch.setattr("ultimate_jobs.views.check", unreachable)
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json() == {"ready": False, "problems": ["database: unavailable"]}
    assert "127.0.0.1" not in response.content.decode()
    staff = User.objects.create_user("ops", password="pw", is_staff=True)
    client.force_login(staff)
    detail = client.get("/health/ready").json()["problems"][0]
    assert "127.0.0.1" in detail and "port 1" in detail
