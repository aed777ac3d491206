"""Dead-letter triage (P10, issue 27): every failed attempt carries a fingerprint
(exception class, normalised message, innermost frames) that Python and PostgreSQL
compute alike; the dashboard groups dead jobs by it (count, first and last seen, a
redacted sample) over the hot table and the archive; Retry-group and Cancel-group are
bounded, need change_job and are audited; ``jobs list --fingerprint F``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from tests.integration.test_archive_readers import (  # noqa: F401 - the fixture
    empty_archive,
    move_finished,
)
from tests.testapp.triage_jobs import settle_order, settle_order_retrying
from ultimate_jobs import api
from ultimate_jobs.api import triage, verbs
from ultimate_jobs.models import Job, JobAction
from ultimate_jobs.observability.triage import fingerprint

pytestmark = pytest.mark.django_db

ERRORS = [
    "",
    "LEASE_LAPSED_FINAL_ATTEMPT",
    "builtins.ValueError: order 42 not found",
    "builtins.ValueError: order 43 not found",
    "builtins.KeyError: 'acct-9'\n\nTraceback (most recent call last):\n"
    '  File "/srv/app/jobs.py", line 12, in body\n    x()\n'
    '  File "/srv/app/lib/x.py", line 3, in x\n    y()\n'
    '  File "/srv/app/lib/y.py", line 7, in y\n    z()\n'
    '  File "/srv/app/lib/z.py", line 9, in z\n    raise KeyError\n',
    'app.Err: id 0190a3c2-7a11-7c3e-9e0f-0123456789ab at 0xdeadBEEF "q"   spaced',
    "x: ünïcode  ÄND tabs\tand 123",
]


def database_fingerprint(error: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT ultimate_jobs_fingerprint(%s)", [error])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("error", ERRORS)
def test_python_and_the_database_compute_the_same_fingerprint(error):
    assert fingerprint(error) == database_fingerprint(error)


def test_the_fingerprint_keeps_the_cause_and_drops_what_varies():
    assert fingerprint(ERRORS[2]) == fingerprint(ERRORS[3])  # numbers normalised
    assert fingerprint(ERRORS[2]) != fingerprint(ERRORS[2].replace("Value", "Key"))
    moved = ERRORS[4].replace("line 7", "line 70").replace("/srv/app", "/opt/v2")
    assert fingerprint(moved) == fingerprint(ERRORS[4])  # lines and directories
    other_frame = ERRORS[4].replace("in z", "in w")
    assert fingerprint(other_frame) != fingerprint(ERRORS[4])  # an inner frame
    outer = ERRORS[4].replace("in body", "in other_body")
    assert fingerprint(outer) == fingerprint(ERRORS[4])  # beyond the innermost three
    assert fingerprint("") is None


def dead_from_two_causes(jobs: Any, missing: int = 5, gateway: int = 3) -> None:
    for order in range(missing):
        settle_order.enqueue(key=f"m{order}", order=order + 100, cause="missing")
    for order in range(gateway):
        settle_order.enqueue(key=f"g{order}", order=order + 7, cause="gateway")
    assert {a.outcome for a in jobs.run()} == {"dead-lettered"}


def prints() -> dict[str, str | None]:
    """The fingerprint of each cause, from the jobs' own rows."""
    out = {}
    for job in Job.objects.filter(state="dead"):
        out[job.input["cause"]] = fingerprint(job.last_error)
    return out


def test_dead_jobs_are_grouped_by_cause_before_and_after_the_move(jobs):
    dead_from_two_causes(jobs)
    by_cause = prints()
    assert len(set(by_cause.values())) == 2
    before = triage.groups()
    assert [(g["fingerprint"], g["jobs"]) for g in before] == [
        (by_cause["missing"], 5),
        (by_cause["gateway"], 3),
    ]
    missing = before[0]
    assert missing["sample"] is not None
    assert missing["sample"]["name"] == settle_order.name
    assert missing["sample"]["error"].startswith("builtins.LookupError: order 10")
    assert missing["first_seen"] <= missing["last_seen"]
    assert move_finished() == 8
    assert not Job.objects.exists()
    after = triage.groups()
    assert [(g["fingerprint"], g["jobs"]) for g in after] == [
        (g["fingerprint"], g["jobs"]) for g in before
    ]
    assert after[0]["first_seen"] == before[0]["first_seen"]


def test_jobs_list_by_fingerprint_lists_one_group(jobs):
    dead_from_two_causes(jobs)
    wanted = prints()["gateway"]
    assert wanted is not None
    out = io.StringIO()
    call_command("jobs", "list", "--fingerprint", wanted, "--json", stdout=out)
    listed = json.loads(out.getvalue())["jobs"]
    assert sorted(j["input"]["order"] for j in listed) == [7, 8, 9]
    assert {j["fingerprint"] for j in listed} == {wanted}
    shown = api.get(listed[0]["id"])
    assert shown["attempts"][-1]["fingerprint"] == wanted
    with pytest.raises(Exception, match="X_INVALID_ARGUMENT"):
        call_command("jobs", "list", "--fingerprint", "not-hex", stdout=io.StringIO())


def test_the_dashboard_shows_the_groups_and_retry_group_needs_change_job(
    jobs, client, operator, monkeypatch
):
    dead_from_two_causes(jobs)
    wanted = prints()["missing"]
    assert wanted is not None
    page = client.get(reverse("admin:ultimate_jobs_dashboard_changelist"))
    html = page.content.decode()
    assert f'data-fingerprint="{wanted}"' in html
    assert f"uj-retry-group-{wanted}" not in html  # view only: no buttons
    url = reverse("admin:ultimate_jobs_dashboard_triage")
    refused = client.post(url, {"fingerprint": wanted, "verb": "retry-group"})
    assert refused.status_code == 403
    assert Job.objects.filter(state="dead").count() == 8

    operator.user_permissions.add(Permission.objects.get(codename="change_job"))
    page = client.get(reverse("admin:ultimate_jobs_dashboard_changelist"))
    assert f"uj-retry-group-{wanted}" in page.content.decode()
    monkeypatch.setattr(verbs, "BULK_LIMIT", 2)  # bounded: 2 a press here
    client.post(url, {"fingerprint": wanted, "verb": "retry-group"})
    assert Job.objects.filter(state="ready").count() == 2
    client.post(url, {"fingerprint": wanted, "verb": "retry-group"})
    client.post(url, {"fingerprint": wanted, "verb": "retry-group"})
    ready = Job.objects.filter(state="ready")
    assert sorted(j.input["cause"] for j in ready) == ["missing"] * 5
    actions = JobAction.objects.filter(action="retry")
    assert actions.count() == 5
    assert {(a.actor_name, a.source) for a in actions} == {("op", "admin")}


def test_cancel_group_cancels_the_live_jobs_still_retrying_that_failure(jobs):
    for order in range(3):
        settle_order_retrying.enqueue(key=f"r{order}", order=order, cause="missing")
    settle_order_retrying.enqueue(key="other", order=9, cause="gateway")
    assert {a.outcome for a in jobs.run()} == {"retried"}
    missing = {
        fingerprint(j.last_error)
        for j in Job.objects.all()
        if j.input["cause"] == "missing"
    }
    [wanted] = missing
    assert wanted is not None
    answer = triage.cancel_group(wanted, actor="ops-oncall")
    assert answer == {"affected": 3, "remaining": 0}
    states = {j.input["key"]: j.state for j in Job.objects.all()}
    assert states == {
        "r0": "cancelled",
        "r1": "cancelled",
        "r2": "cancelled",
        "other": "delayed",
    }
    assert JobAction.objects.filter(action="cancel", actor_id="ops-oncall").count() == 3
