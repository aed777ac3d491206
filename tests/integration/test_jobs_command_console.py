"""CLI parity with the admin (issue 15, P3): ``jobs retry --from-step``, ``jobs retry
--queue Q --state dead`` (bounded to 1,000 a call, resumable by calling again), and
``jobs pause`` warning on a queue nobody declares."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command

from tests.testapp.console_jobs import three_steps
from tests.testapp.jobs import noop, terminal
from ultimate_jobs import api
from ultimate_jobs.api import verbs
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def jobs_cmd(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("jobs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_retry_from_a_step_drops_that_step_and_the_later_ones(jobs):
    answer = three_steps.enqueue(key="cli", fail_at="publish")
    jobs.run()
    out, _ = jobs_cmd("retry", str(answer.id), "--from-step", "transform", "--json")
    shown = json.loads(out)
    assert (shown["state"], shown["from_step"]) == ("ready", "transform")
    kept = JobStep.objects.filter(job_id=answer.id, archived=False)
    assert list(kept.values_list("name", flat=True)) == ["fetch"]
    assert api.job_actions(answer.id)[-1]["reason"] == "from step 'transform'"


def test_retry_of_a_queue_moves_its_dead_jobs_in_bounded_resumable_calls(
    jobs, monkeypatch
):
    monkeypatch.setattr(verbs, "BULK_LIMIT", 2)
    dead = [terminal.enqueue(key=f"d{i}") for i in range(3)]
    jobs.run()
    assert set(Job.objects.values_list("state", flat=True)) == {"dead"}
    out, _ = jobs_cmd("retry", "--queue", "default", "--state", "dead", "--json")
    assert json.loads(out) == {"affected": 2, "remaining": 1}
    out, _ = jobs_cmd("retry", "--queue", "default", "--state", "dead")
    assert out.strip() == "retried 1 job; 0 remaining"
    assert set(
        Job.objects.filter(pk__in=[d.id for d in dead]).values_list("state", flat=True)
    ) == {"ready"}


def test_retry_needs_an_id_or_a_queue_and_state():
    with pytest.raises(Exception, match="give a job id, or --queue and --state"):
        jobs_cmd("retry")
    with pytest.raises(Exception, match="--from-step takes one job id"):
        jobs_cmd("retry", "--queue", "default", "--state", "dead", "--from-step", "x")


def test_pause_warns_on_a_queue_nobody_declares():
    out, err = jobs_cmd("pause", "no-such-queue", "--json")
    assert json.loads(out) == {
        "queue": "no-such-queue",
        "paused": True,
        "was_paused": False,
    }
    assert "no job of this deploy declares queue 'no-such-queue'" in err
    _, err = jobs_cmd("pause", "default")
    assert err == ""


def test_show_takes_the_start_of_an_id_when_one_job_has_it(jobs):
    from ultimate_jobs.api.reads import resolve_id
    from ultimate_jobs.ground.exceptions import InvalidArgument, JobNotFound

    answer = noop.enqueue(key="prefix")
    out, _ = jobs_cmd("show", str(answer.id)[:13], "--json")
    assert json.loads(out)["id"] == str(answer.id)
    with pytest.raises(JobNotFound):
        resolve_id("ffffffff")
    other = noop.enqueue(key="prefix-2")
    twin = uuid.UUID(str(answer.id)[:14] + str(other.id)[14:])  # same first 12 digits
    Job.objects.filter(pk=other.id).update(id=twin)
    with pytest.raises(InvalidArgument, match="more than one job"):
        resolve_id(str(answer.id)[:13])
    assert resolve_id(str(twin)) == twin  # a whole id is never ambiguous
