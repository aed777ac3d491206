"""A manual trigger never overlaps a run of its task in progress (C7, seed "multi-replica
deployments"), and the manifest lists what this deploy declares (J7, seed
inspectManifest): ``manage.py jobs manifest [--json]`` and the admin's Manifest page."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse

from tests.testapp.jobs import noop
from ultimate_jobs import (
    TaskRunning,
    api,
    pause_task,
    registry,
    task,
    task_registry,
    trigger,
)
from ultimate_jobs.models import Job, TaskWatermark

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_app_purge")]


@pytest.fixture
def nightly():
    calls = itertools.count()

    @task(cron="0 3 * * *", tz="Europe/Paris", catch_up="run-once", name="nightly")
    def fire(occurrence):
        return [(noop, {"key": f"nightly-{next(calls)}"})]  # a new key every fire

    yield fire
    task_registry.unregister("nightly")


def test_a_trigger_is_refused_while_the_tasks_job_is_live_unless_forced(jobs, nightly):
    [first] = trigger(nightly)
    row = Job.objects.get(pk=first.id)
    assert row.correlation_id.startswith("task:nightly@")
    with pytest.raises(TaskRunning) as refused:
        trigger("nightly")
    assert (refused.value.code, refused.value.task) == ("X_TASK_RUNNING", "nightly")
    assert refused.value.job_ids == [first.id]
    assert Job.objects.filter(name="testapp.noop").count() == 1  # nothing enqueued
    [forced] = trigger(nightly, force=True)
    assert not forced.deduped and forced.id != first.id  # a second, overlapping run
    jobs.run()
    assert set(Job.objects.values_list("state", flat=True)) == {"done"}
    [again] = trigger(nightly)  # nothing live any more
    assert not again.deduped


def test_the_admin_run_now_is_refused_while_live_and_the_forced_one_fires(
    client, nightly
):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_taskwatermark", "change_taskwatermark"]
        )
    )
    client.force_login(user)
    trigger(nightly)
    pause_task(nightly)  # writes the watermark row the admin lists
    url = reverse("admin:ultimate_jobs_taskwatermark_changelist")
    mark = TaskWatermark.objects.get(key="task:nightly")
    page = client.post(
        url, {"action": "run_now", "_selected_action": [mark.pk]}, follow=True
    )
    said = [str(m) for m in page.context["messages"]]
    assert len(said) == 1
    assert said[0].startswith("Task nightly was refused: ")  # in words (issue 15)
    assert said[0].endswith("[X_TASK_RUNNING]")
    assert Job.objects.filter(name="testapp.noop").count() == 1
    page = client.post(
        url, {"action": "run_now_forced", "_selected_action": [mark.pk]}, follow=True
    )
    assert [str(m) for m in page.context["messages"]] == [
        "Task nightly: run now (forced) (1 job enqueued)."
    ]
    assert Job.objects.filter(name="testapp.noop").count() == 2


def test_the_manifest_lists_every_declared_job_and_task(nightly):
    out = io.StringIO()
    call_command("jobs", "manifest", "--json", stdout=out)
    answer = json.loads(out.getvalue())
    assert answer == api.manifest() | {"tasks": answer["tasks"]}
    jobs_by_name = {row["name"]: row for row in answer["jobs"]}
    assert sorted(jobs_by_name) == registry.names()
    flaky = jobs_by_name["testapp.flaky"]
    assert flaky["kind"] == "job"
    assert flaky["queue"] == "default"
    assert flaky["retry"] == {
        "attempts": 4,
        "backoff": "exponential",
        "delay": 10.0,
        "max_delay": 300.0,
        "jitter": False,
    }
    assert flaky["retention"] == {
        "done": {"days": 1.0},
        "failed": {"days": 30.0},
        "dead": {"days": 30.0},
        "cancelled": {"days": 7.0},
    }
    assert flaky["input"] is not None
    [row] = [t for t in answer["tasks"] if t["name"] == "nightly"]
    assert (row["cron"], row["tz"], row["catch_up"], row["max_catch_up"]) == (
        "0 3 * * *",
        "Europe/Paris",
        "run-once",
        10,
    )
    assert row["fires"] == ["testapp.noop"] and row["fires_error"] is None
    assert row["next_run"].endswith(("+01:00", "+02:00"))
    assert "T03:00:00" in row["next_run"]
    text = io.StringIO()
    call_command("jobs", "manifest", stdout=text)
    assert "task nightly  cron='0 3 * * *' tz=Europe/Paris" in text.getvalue()
    assert "fires=testapp.noop" in text.getvalue()


def test_a_task_that_raises_shows_its_error_in_the_manifest():
    @task(cron="* * * * *", tz="UTC", name="broken")
    def broken(occurrence):
        raise LookupError("no fleet configured")

    try:
        [row] = [t for t in api.manifest()["tasks"] if t["name"] == "broken"]
    finally:
        task_registry.unregister("broken")
    assert row["fires"] is None
    assert row["fires_error"] == "LookupError: no fleet configured"


def test_the_admin_manifest_page_needs_the_view_permission(client, nightly):
    url = reverse("admin:ultimate_jobs_declaredjob_changelist")
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_job"))
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "<code>testapp.flaky</code>" in text
    assert "4 attempts, exponential from 10 s up to 300 s" in text
    assert "<code>nightly</code>" in text
    assert "<code>0 3 * * *</code>" in text
    assert "Manifest" in client.get(reverse("admin:index")).content.decode()
