"""Per-run log capture (seed logMaxEntries; M2, P3, F6): what a body writes through
``run.logger`` is kept with the attempt, bounded (RUN_LOG_MAX_ENTRIES lines, each line
bounded), redacted as it is written (B5), shown by ``jobs show --json``
(``logs``) and the admin job detail, and trimmed with the job by retention."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.testapp.hardening_jobs import signup
from tests.testapp.jobs import noop
from tests.testapp.seed_jobs import chatter
from ultimate_jobs import api
from ultimate_jobs.declaration.runlog import MAX_LINE_CHARS
from ultimate_jobs.jobs import purge_tables
from ultimate_jobs.models import Job, RunLog

pytestmark = pytest.mark.django_db


def show(job_id):
    out = io.StringIO()
    call_command("jobs", "show", str(job_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def messages(group):
    return [(line["level"], line["message"]) for line in group["entries"]]


def test_lines_are_kept_per_attempt_and_shown_by_jobs_show(jobs):
    """INFO and above are kept whatever the logging configuration (the test settings
    leave the root logger at WARNING); DEBUG is not; an exception keeps its traceback."""
    answer = chatter.enqueue(key="c1", lines=2, fail_times=1)
    jobs.run()
    jobs.travel(seconds=2)
    jobs.run()
    shown = show(answer.id)
    assert shown["state"] == "done"
    first, second = shown["logs"]
    assert (first["attempt"], first["dropped"]) == (1, 0)
    assert (second["attempt"], second["dropped"]) == (2, 0)
    assert first["run_id"] == second["run_id"] == str(answer.run_id)
    assert messages(first)[:2] == [
        ("INFO", "line 0 of attempt 1"),
        ("INFO", "line 1 of attempt 1"),
    ]
    level, failure = messages(first)[2]
    assert level == "ERROR"
    assert failure.startswith("about to fail\nTraceback (most recent call last):")
    assert failure.endswith("ValueError: attempt 1 refused")
    assert messages(second) == [
        ("INFO", "line 0 of attempt 2"),
        ("INFO", "line 1 of attempt 2"),
    ]
    assert all(line["at"].endswith("+00:00") for line in first["entries"])
    assert api.get(answer.id)["logs"] == shown["logs"]


def test_the_newest_lines_are_kept_up_to_the_setting_each_line_bounded(jobs, settings):
    settings.ULTIMATE_JOBS = {"RUN_LOG_MAX_ENTRIES": 3}
    answer = chatter.enqueue(key="c2", lines=5, size=10_000)
    jobs.run()
    [group] = show(answer.id)["logs"]
    # 5 info lines and the long warning: the newest 3 are kept, 3 older ones counted.
    assert group["dropped"] == 3
    assert [m for _, m in messages(group)[:2]] == [
        "line 3 of attempt 1",
        "line 4 of attempt 1",
    ]
    level, long_line = messages(group)[2]
    assert level == "WARNING"
    assert len(long_line) == MAX_LINE_CHARS
    assert long_line.endswith(f" … ({10_000 - MAX_LINE_CHARS} more characters)")


def test_one_statement_per_attempt_that_logs_and_none_for_one_that_does_not(jobs):
    """The hot path: an attempt that logs nothing writes no log row, one that logs
    many lines writes ONE row."""
    quiet = noop.enqueue(key="quiet")
    loud = chatter.enqueue(key="loud", lines=50)
    jobs.run()
    assert not RunLog.objects.filter(job_id=quiet.id).exists()
    [row] = RunLog.objects.filter(job_id=loud.id)
    assert len(row.entries) == 50
    with CaptureQueriesContext(connection) as captured:
        chatter.enqueue(key="loud-2", lines=50)
        jobs.run()
    writes = [
        q["sql"]
        for q in captured.captured_queries
        if "ultimate_jobs_run_log" in q["sql"]
    ]
    assert len(writes) == 1
    assert writes[0].startswith("INSERT INTO ultimate_jobs_run_log")


def test_zero_keeps_nothing(jobs, settings):
    settings.ULTIMATE_JOBS = {"RUN_LOG_MAX_ENTRIES": 0}
    answer = chatter.enqueue(key="c0", lines=3)
    jobs.run()
    assert show(answer.id)["logs"] == []
    assert not RunLog.objects.filter(job_id=answer.id).exists()


def test_kept_lines_are_redacted_when_they_are_written(jobs):
    """B5: run.logger replaces the input's redacted values in every line it keeps
    (message, arguments, traceback), so the stored and shown logs never hold them."""
    answer = signup.enqueue(
        email="ann@example.com",
        org="acme",
        password="hunter2-secret",
        card={"number": "4111-1111-1111-1111"},
        api_token="tok-planted-123",
    )
    jobs.run()
    [group] = show(answer.id)["logs"]
    text = json.dumps(group)
    for secret in ("hunter2-secret", "4111-1111-1111-1111", "tok-planted-123"):
        assert secret not in text
    assert [m for _, m in messages(group)] == [
        "signing up ann@example.com with [redacted]",
        "card [redacted]",
    ]


def test_the_admin_job_detail_shows_the_logs(jobs, client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    answer = chatter.enqueue(key="c4", lines=2)
    jobs.run()
    page = client.get(
        reverse("admin:ultimate_jobs_job_change", args=[answer.id])
    ).content.decode()
    assert "<strong>attempt 1</strong>" in page
    assert "INFO    line 1 of attempt 1" in page


def test_retention_trims_the_logs_with_their_job(jobs):
    """F6: the purge deletes a finished job past its retention (done: 1 day by
    default) and its log rows go with it (ON DELETE CASCADE)."""
    old = chatter.enqueue(key="old", lines=1)
    jobs.run()
    jobs.travel(timedelta(days=2))
    young = chatter.enqueue(key="young", lines=1)
    jobs.run()
    assert RunLog.objects.count() == 2
    purge_tables.enqueue()
    jobs.run()
    assert not Job.objects.filter(pk=old.id).exists()
    assert list(RunLog.objects.values_list("job_id", flat=True)) == [young.id]
