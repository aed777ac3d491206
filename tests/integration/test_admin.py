"""The admin as the operator surface (P1, P2): lists render, actions need permissions
and are audited."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.testapp.jobs import noop, terminal
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_job", "change_job"])
    )
    client.force_login(user)
    return user


def test_the_job_list_and_detail_render_with_filters_and_id_search(
    client, operator, jobs
):
    answer = terminal.enqueue(key="t")
    jobs.run()
    url = reverse("admin:ultimate_jobs_job_changelist")
    page = client.get(url, {"state": "dead"})
    assert page.status_code == 200
    assert "testapp.terminal" in page.content.decode()
    assert client.get(url, {"q": str(answer.id)[:8]}).status_code == 200
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[answer.id]))
    assert detail.status_code == 200
    assert "this input can never work" in detail.content.decode()


def test_the_job_detail_shows_its_step_trace(client, operator, jobs):
    from tests.testapp.durable_jobs import onboard

    answer = onboard.enqueue(key="trace", email_failures=0)
    jobs.run()
    detail = client.get(reverse("admin:ultimate_jobs_job_change", args=[answer.id]))
    page = detail.content.decode()
    assert "<tr class='uj-step'><td>provision</td><td>step</td><td>done</td>" in page
    assert "<td>sleep:3d</td><td>sleep</td><td>waiting</td>" in page
    assert " UTC</td>" in page and "+00:00" not in page.split("uj-steps")[1]


def test_retry_action_requeues_and_is_audited(client, operator, jobs):
    answer = terminal.enqueue(key="t")
    jobs.run()
    url = reverse("admin:ultimate_jobs_job_changelist")
    response = client.post(
        url, {"action": "retry_jobs", "_selected_action": [str(answer.id)]}, follow=True
    )
    assert response.status_code == 200
    assert Job.objects.get(pk=answer.id).state == "ready"
    entry = LogEntry.objects.get()
    assert (entry.user, entry.object_id, entry.change_message) == (
        operator,
        str(answer.id),
        "retry via admin",
    )


def test_actions_need_their_permissions(client):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    answer = noop.enqueue(key="n")
    url = reverse("admin:ultimate_jobs_job_changelist")
    client.post(url, {"action": "cancel_jobs", "_selected_action": [str(answer.id)]})
    assert Job.objects.get(pk=answer.id).state == "ready"
    assert client.get(reverse("admin:ultimate_jobs_job_add")).status_code == 403
