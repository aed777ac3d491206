"""The task fires and schedules pages (issue 15; issue 16 item 9; C6, C7): state said in
words (a paused task once showed a green tick), next run visible and none while paused,
the fire history linked to the jobs each occurrence enqueued, human messages, and
pause/resume that work for a task whose code this web process never imported."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.testapp.jobs import noop
from ultimate_jobs import recur
from ultimate_jobs.models import TaskWatermark

pytestmark = pytest.mark.django_db
FIRES = "admin:ultimate_jobs_taskwatermark_changelist"


@pytest.fixture
def operator(client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "view_schedule",
                "change_schedule",
                "view_taskwatermark",
                "change_taskwatermark",
                "view_job",
            ]
        )
    )
    client.force_login(user)
    return user


def said(response):
    return [str(m) for m in response.context["messages"]]


def stored_elsewhere():
    """A task another process declared and a scheduler recorded: not imported here."""
    return TaskWatermark.objects.create(
        key="task:reports.nightly",
        kind="task",
        name="reports.nightly",
        spec="0 3 * * * UTC",
        last_occurrence=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_pause_and_resume_work_for_a_task_this_process_never_imported(client, operator):
    mark = stored_elsewhere()
    response = client.post(
        reverse(FIRES),
        {"action": "pause", "_selected_action": [mark.pk]},
        follow=True,
    )
    assert said(response) == ["Task reports.nightly: paused."]
    mark.refresh_from_db()
    assert (mark.paused, mark.paused_by) == (True, "op (admin)")
    html = response.content.decode()
    assert "paused by op (admin)" in html
    assert "— (paused)" in html  # no next run while paused
    response = client.post(
        reverse(FIRES), {"action": "resume", "_selected_action": [mark.pk]}, follow=True
    )
    assert said(response) == ["Task reports.nightly: resumed."]
    assert TaskWatermark.objects.get(pk=mark.pk).paused is False
    response = client.post(
        reverse(FIRES),
        {"action": "run_now", "_selected_action": [mark.pk]},
        follow=True,
    )
    [message] = said(response)
    assert message.startswith(
        "Task reports.nightly was refused: its code is not imported by this process"
    )


def test_the_fires_page_says_active_and_shows_the_next_run(client, operator):
    stored_elsewhere()
    html = client.get(reverse(FIRES)).content.decode()
    assert "icon-yes.svg" not in html and "icon-no.svg" not in html
    assert ">active<" in html
    assert "UTC" in html and "03:00" in html  # the next run, in its zone


def test_a_schedule_links_its_fires_to_the_jobs_they_enqueued(client, operator):
    schedule = recur(noop, {"key": "n"}, cron="0 9 * * *", tz="UTC", schedule_key="ops")
    response = client.post(
        reverse("admin:ultimate_jobs_schedule_changelist"),
        {"action": "run_now", "_selected_action": [schedule.pk]},
        follow=True,
    )
    assert said(response) == ["Schedule ops: run now (1 job enqueued)."]
    html = client.get(
        reverse("admin:ultimate_jobs_schedule_change", args=[schedule.pk])
    ).content.decode()
    jobs = reverse("admin:ultimate_jobs_job_changelist")
    assert f"{jobs}?fired_by=schedule%3Aops" in html
    listed = client.get(jobs, {"fired_by": "schedule:ops"}).content.decode()
    assert listed.count('class="uj-id"') == 1


def test_webhook_deliveries_are_spelt_right(client, admin_client):
    html = admin_client.get(reverse("admin:index")).content.decode()
    assert "Webhook deliverys" not in html
    assert "Webhook deliveries" in html
