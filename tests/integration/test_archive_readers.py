"""Every reader sees a job in the archive as it saw it in the hot table (Q2): ``api.get``
and ``jobs show``, ``jobs list`` and its pages across both tables, an id prefix, the
django.tasks ``get_result``, the admin's job page and the archive list, and retry, which
moves the job back with its steps (and leaves it in the archive when refused)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from tests.testapp.console_jobs import three_steps
from tests.testapp.tasks import add
from ultimate_jobs import api
from ultimate_jobs.api.reads import resolve_id
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.ground.exceptions import JobDuplicate, JobNotFound
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import Job, JobArchive, JobStep
from ultimate_jobs.testing.factories import JobFactory

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def empty_archive(django_db_blocker: Any) -> Iterator[None]:
    """Django's flush leaves unmanaged tables alone."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def move_finished() -> int:
    """Move every finished job, as the leader does once ARCHIVE_AFTER passed."""
    latest = (
        Job.objects.exclude(finished_at=None)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)[0]
    )
    assert latest is not None
    done = archive.move(
        DjangoDatabase("default"),
        after=60.0,
        batch=1000,
        max_batches=10,
        now=latest + 2 * MINUTE,
    )
    return done.moved


def failed_with_steps(jobs: Any, key: str = "k1") -> str:
    answer = three_steps.enqueue(key=key, token="s3cret", fail_at="transform")
    jobs.run()
    return str(answer.id)


def test_show_answers_the_same_json_before_and_after_the_move(jobs):
    job_id = failed_with_steps(jobs)
    before = api.get(job_id)
    shown_before = io.StringIO()
    call_command("jobs", "show", job_id, "--json", stdout=shown_before)
    assert move_finished() == 1
    assert not Job.objects.filter(pk=job_id).exists()
    after = api.get(job_id)
    assert after == before
    assert [s["name"] for s in after["steps"]] == ["fetch", "transform"]
    assert after["input"]["token"] == "[redacted]"
    shown_after = io.StringIO()
    call_command("jobs", "show", job_id, "--json", stdout=shown_after)
    assert json.loads(shown_after.getvalue()) == json.loads(shown_before.getvalue())
    # An id prefix finds it in the archive too.
    assert str(resolve_id(job_id[:13])) == job_id


def test_list_pages_through_both_tables_newest_first(jobs):
    old = [JobFactory.create(done=True).id for _ in range(3)]
    assert move_finished() == 3
    new = [JobFactory.create(ready=True).id for _ in range(2)]
    ids = [*old, *new]
    everything = api.list_jobs(limit=10)
    assert [j["id"] for j in everything["jobs"]] == [str(i) for i in reversed(ids)]
    first = api.list_jobs(limit=2)
    second = api.list_jobs(limit=2, after=first["next"])
    third = api.list_jobs(limit=2, after=second["next"])
    pages = [first, second, third]
    assert [[j["id"] for j in p["jobs"]] for p in pages] == [
        [str(new[1]), str(new[0])],
        [str(old[2]), str(old[1])],
        [str(old[0])],
    ]
    assert [(p["next"] is not None, p["previous"] is not None) for p in pages] == [
        (True, False),
        (True, True),
        (False, True),
    ]
    back = api.list_jobs(limit=2, before=third["previous"])
    assert [j["id"] for j in back["jobs"]] == [str(old[2]), str(old[1])]
    assert [j["state"] for j in api.list_jobs(state="done")["jobs"]] == ["done"] * 3
    assert api.list_jobs(state="ready")["jobs"][0]["id"] == str(new[1])
    listed = io.StringIO()
    call_command("jobs", "list", "--json", "--state", "done", stdout=listed)
    assert [j["id"] for j in json.loads(listed.getvalue())["jobs"]] == [
        str(i) for i in reversed(old)
    ]


def test_get_result_reads_a_task_result_from_the_archive(jobs):
    result = add.enqueue(2, 3)
    jobs.run()
    assert move_finished() == 1
    assert JobArchive.objects.filter(pk=result.id).exists()
    found = add.get_result(result.id)
    assert (str(found.status), found.return_value) == ("SUCCESSFUL", 5)


def test_retry_moves_the_job_back_with_its_steps_and_runs_from_them(jobs):
    job_id = failed_with_steps(jobs)
    assert move_finished() == 1
    run_id = api.retry(job_id, from_step="transform")
    assert JobArchive.objects.filter(pk=job_id).count() == 0
    row = Job.objects.get(pk=job_id)
    assert (row.state, row.run_id, row.attempt) == ("ready", run_id, 0)
    # The steps came back; retry from "transform" dropped it and what followed.
    assert list(
        JobStep.objects.filter(job_id=job_id).values_list("name", flat=True)
    ) == ["fetch"]
    assert [a["outcome"] for a in api.get(job_id)["attempts"]] == ["dead-lettered"]


def test_a_refused_retry_leaves_the_job_in_the_archive(jobs):
    job_id = failed_with_steps(jobs)
    assert move_finished() == 1
    three_steps.enqueue(key="k1")  # a live job now holds the key (J2)
    with pytest.raises(JobDuplicate):
        api.retry(job_id)
    assert JobArchive.objects.filter(pk=job_id).count() == 1
    assert not Job.objects.filter(pk=job_id).exists()


def test_remove_deletes_a_job_in_the_archive_and_records_who(jobs):
    job_id = failed_with_steps(jobs)
    assert move_finished() == 1
    api.remove(job_id, actor="ops")
    assert not JobArchive.objects.filter(pk=job_id).exists()
    assert [(a["action"], a["actor"]["id"]) for a in api.job_actions(job_id)] == [
        ("remove", "ops")
    ]
    with pytest.raises(JobNotFound):
        api.remove(job_id)


def test_the_admin_shows_a_job_in_the_archive_and_lists_the_archive(jobs, client):
    job_id = failed_with_steps(jobs)
    assert move_finished() == 1
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    page = client.get(reverse("admin:ultimate_jobs_job_change", args=[job_id]))
    assert page.status_code == 200
    body = page.content.decode()
    assert job_id in body
    assert "failed after transform" in body
    assert "fetch" in body and "transform" in body  # the steps, from the trail
    listed = client.get(reverse("admin:ultimate_jobs_jobarchive_changelist"))
    assert listed.status_code == 200
    assert job_id in listed.content.decode()
    only_done = client.get(
        reverse("admin:ultimate_jobs_jobarchive_changelist"), {"state": "done"}
    )
    assert job_id not in only_done.content.decode()
    missing = client.get(
        reverse(
            "admin:ultimate_jobs_job_change",
            args=["0" * 8 + "-0000-7000-8000-" + "0" * 12],
        )
    )
    assert missing.status_code == 302  # the admin's "no such object" redirect
