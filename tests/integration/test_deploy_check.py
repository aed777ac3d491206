"""P11: ``manage.py jobs deploy-check`` names each thing the new code would break
(undeclared job names with live rows, stored inputs the signature refuses, vanished
cron tasks, schedules of undeclared jobs or refused inputs, queues no declared job
serves), on every alias, and exits non-zero; a clean database passes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.testapp.jobs import noop
from ultimate_jobs.api import deploy_check
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.models import Schedule
from ultimate_jobs.testing.factories import (
    JobFactory,
    ScheduleFactory,
    TaskWatermarkFactory,
)

pytestmark = [
    pytest.mark.django_db(databases=["default", "jobs_b"]),
    pytest.mark.usefixtures("without_app_purge"),
]
ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}


def check(*args: str) -> tuple[dict[str, Any], str | None]:
    out = io.StringIO()
    try:
        call_command("jobs", "deploy-check", "--json", *args, stdout=out)
    except CommandError as exc:
        return json.loads(out.getvalue()), str(exc)
    return json.loads(out.getvalue()), None


def only(document: dict[str, Any]) -> dict[str, Any]:
    [problem] = document["problems"]
    return problem


def test_a_clean_database_passes():
    noop.enqueue(key="fine")
    JobFactory(name="gone.job", state="done")  # finished rows are history, not a risk
    document, error = check()
    assert (document["ok"], document["problems"], error) == (True, [], None)
    assert document["aliases"] == ["default"]
    out = io.StringIO()
    call_command("jobs", "deploy-check", stdout=out)
    assert out.getvalue().strip() == "deploy-check: no problem on default"


def test_live_rows_of_an_undeclared_job(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    JobFactory(name="billing.old_charge", state="ready")
    JobFactory(name="billing.old_charge", state="delayed")
    JobFactory.create(name="billing.old_charge", state="suspended")
    JobFactory.build(name="billing.old_refund", queue="routed").save(using="jobs_b")
    document, error = check()
    assert document["ok"] is False
    assert error == "deploy-check: 2 problem(s), listed above"
    assert document["aliases"] == ["default", "jobs_b"]
    first, second = document["problems"]
    assert first == {
        "code": "undeclared_job",
        "alias": "default",
        "name": "billing.old_charge",
        "rows": 3,
        "states": {"delayed": 1, "ready": 1, "suspended": 1},
        "message": "3 live row(s) of job 'billing.old_charge' on 'default', which "
        "this code does not declare: no worker of it claims them",
    }
    assert (second["code"], second["alias"], second["name"], second["rows"]) == (
        "undeclared_job",
        "jobs_b",
        "billing.old_refund",
        1,
    )


def test_stored_inputs_the_signature_refuses_are_sampled_and_counted():
    noop.enqueue(key="good")
    bad = JobFactory.create(name="testapp.noop", input={"key": "a", "amount": 3})
    JobFactory(name="testapp.noop", input={})
    problem = only(check()[0])
    assert (
        problem["code"],
        problem["name"],
        problem["checked"],
        problem["refused"],
    ) == ("input_refused", "testapp.noop", 3, 2)
    assert problem["example"]["error"].startswith("X_INVALID_PAYLOAD")
    assert problem["example"]["id"] == str(bad.id)  # the first refused, by id
    # The sample is the first rows by id: the good one, then the bad one.
    sampled = only(check("--sample", "2")[0])
    assert (sampled["checked"], sampled["refused"]) == (2, 1)
    assert check("--sample", "1")[0]["ok"] is True
    with pytest.raises(InvalidArgument) as info:
        deploy_check(sample=0)
    assert (info.value.field, info.value.value) == ("sample", 0)


def test_a_declared_cron_task_that_disappeared():
    TaskWatermarkFactory(kind="task", name="reports.nightly")
    problem = only(check()[0])
    assert (problem["code"], problem["name"], problem["alias"]) == (
        "task_disappeared",
        "reports.nightly",
        "default",
    )
    assert "will not fire again" in problem["message"]


def test_schedules_of_an_undeclared_job_or_a_refused_input():
    for key in ("s-gone", "s-bad", "s-good"):
        ScheduleFactory(key=key, job="testapp.noop", input={"key": "x"})
    # Stored by the old code: the save-time check of this code never saw them.
    Schedule.objects.filter(key="s-gone").update(job="billing.old_charge", input={})
    Schedule.objects.filter(key="s-bad").update(input={"wrong": 1})
    bad, gone = check()[0]["problems"]
    assert (gone["code"], gone["key"], gone["name"]) == (
        "schedule_job_undeclared",
        "s-gone",
        "billing.old_charge",
    )
    assert (bad["code"], bad["key"]) == ("schedule_input_refused", "s-bad")
    assert bad["error"].startswith("X_INVALID_PAYLOAD: testapp.noop: wrong=1")


def test_a_queue_no_declared_job_serves():
    JobFactory(name="testapp.noop", queue="retired-queue", input={"key": "q"})
    problem = only(check()[0])
    assert (problem["code"], problem["queue"], problem["rows"]) == (
        "queue_unserved",
        "retired-queue",
        1,
    )
