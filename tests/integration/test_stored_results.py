"""Stored results (P8): ``@job(store_result=True)`` keeps the body's JSON return value,
bounded by MAX_RESULT_BYTES, shown by ``jobs show --json`` and the admin; a job that
does not opt in has no result field (issue 15: "Result: -" on every job)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from tests.testapp.console_jobs import summed, unstored
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def show(job_id):
    out = io.StringIO()
    call_command("jobs", "show", str(job_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_job_that_opts_in_keeps_its_result(jobs):
    answer = summed.enqueue(key="s1", numbers=[1, 2, 3])
    jobs.run()
    shown = show(answer.id)
    assert shown["state"] == "done"
    assert shown["result"] == {"sum": 6, "pad": ""}
    assert summed.describe()["store_result"] is True


def test_a_job_that_does_not_opt_in_shows_no_result_field(jobs):
    answer = unstored.enqueue(key="u1")
    jobs.run()
    shown = show(answer.id)
    assert shown["state"] == "done"
    assert "result" not in shown
    assert Job.objects.get(pk=answer.id).result is None


def test_a_result_past_max_result_bytes_fails_the_job_with_a_coded_error(
    jobs, settings
):
    settings.ULTIMATE_JOBS = {"MAX_RESULT_BYTES": 100}
    answer = summed.enqueue(key="s2", numbers=[1], pad=200)
    jobs.run()
    job = Job.objects.get(pk=answer.id)
    assert (job.state, job.error_code, job.result) == (
        "dead",
        "X_RESULT_TOO_LARGE",
        None,
    )
    assert "MAX_RESULT_BYTES is 100" in job.last_error
    assert show(answer.id)["result"] is None


def test_store_result_must_be_a_bool():
    from ultimate_jobs import job
    from ultimate_jobs.ground.exceptions import JobDeclarationInvalid

    def bad(run) -> None:  # pragma: no cover - never declared
        pass

    fields: dict[str, Any] = {"store_result": "yes"}
    with pytest.raises(JobDeclarationInvalid, match="store_result"):
        job(idempotency_key=lambda p: "k", tenant=lambda p: None, **fields)(bad)
