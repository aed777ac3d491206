"""The admin's job detail (issue 15; P1, P2, P6, P8): action buttons with the list's
permissions and audit, retry from a chosen step, human refusals, the attempt history,
step outputs redacted, and a result only for jobs that keep one."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.testapp.console_jobs import summed, three_steps, unstored
from tests.testapp.jobs import flaky, noop
from ultimate_jobs import api
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def login(client, *codenames):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_job", *codenames])
    )
    client.force_login(user)
    return user


def page(client, job_id):
    response = client.get(reverse("admin:ultimate_jobs_job_change", args=[job_id]))
    assert response.status_code == 200
    return response.content.decode()


def act(client, job_id, **data):
    return client.post(
        reverse("admin:ultimate_jobs_job_act", args=[job_id]), data, follow=True
    )


def said(response):
    return [str(m) for m in response.context["messages"]]


def test_a_dead_job_retried_from_a_step_reruns_that_step_and_the_later_ones(
    client, jobs
):
    login(client, "change_job")
    answer = three_steps.enqueue(key="k1", token="s3cret", fail_at="transform")
    jobs.run()
    html = page(client, answer.id)
    # Buttons for a finished job: retry, with its steps to choose from; no cancel.
    assert 'id="uj-retry"' in html and 'id="uj-cancel"' not in html
    assert '<option value="transform">from step transform</option>' in html
    # Step outputs are shown, redacted like the input (B5).
    assert "<td>fetch</td><td>step</td><td>done</td>" in html
    assert "&quot;step&quot;: &quot;fetch&quot;" in html
    assert "s3cret" not in html
    response = act(client, answer.id, verb="retry", from_step="fetch")
    assert said(response) == [f"Job {answer.id}: retried from step 'fetch'."]
    job = Job.objects.get(pk=answer.id)
    assert job.state == "ready"
    assert not JobStep.objects.filter(job_id=answer.id, archived=False).exists()
    entry = LogEntry.objects.get(object_id=str(answer.id))
    assert entry.change_message == "retry from step 'fetch' via admin"
    assert [a["action"] for a in api.job_actions(answer.id)] == ["retry"]


def test_cancel_button_cancels_a_queued_job_and_refusals_are_sentences(client, jobs):
    login(client, "change_job")
    answer = noop.using(delay="1h").enqueue(key="later")
    html = page(client, answer.id)
    assert 'id="uj-cancel"' in html and 'id="uj-promote"' in html
    response = act(client, answer.id, verb="cancel")
    assert said(response) == [f"Job {answer.id}: cancelled."]
    assert Job.objects.get(pk=answer.id).state == "cancelled"
    # A stale page posting cancel again is told why, in words, with the code kept.
    response = act(client, answer.id, verb="cancel")
    assert said(response) == [
        f"Job {answer.id} is already cancelled; it cannot be cancelled. "
        "[X_JOB_NOT_CANCELLABLE]"
    ]
    response = act(client, answer.id, verb="retry", from_step="nope")
    assert said(response) == [
        f"Job {answer.id} has no step 'nope' to retry from. [X_INVALID_ARGUMENT]"
    ]


def test_buttons_need_the_permissions_the_list_actions_need(client, jobs):
    login(client)  # view only
    answer = noop.enqueue(key="viewer")
    html = page(client, answer.id)
    assert "uj-action" not in html
    response = client.post(
        reverse("admin:ultimate_jobs_job_act", args=[answer.id]), {"verb": "cancel"}
    )
    assert response.status_code == 403
    response = client.post(
        reverse("admin:ultimate_jobs_job_act", args=[answer.id]), {"verb": "remove"}
    )
    assert response.status_code == 403
    assert Job.objects.get(pk=answer.id).state == "ready"


def test_remove_needs_delete_job_and_returns_to_the_list(client, jobs):
    login(client, "change_job", "delete_job")
    answer = noop.enqueue(key="gone")
    response = act(client, answer.id, verb="remove")
    assert response.redirect_chain[-1][0] == reverse(
        "admin:ultimate_jobs_job_changelist"
    )
    assert not Job.objects.filter(pk=answer.id).exists()


def test_the_attempt_history_table_and_no_stale_error_on_a_done_job(client, jobs):
    login(client, "change_job")
    answer = flaky.enqueue(key="history", fail_times=1)
    jobs.run()
    jobs.travel(seconds=11)
    jobs.run()
    html = page(client, answer.id)
    assert html.count("<tr class='uj-attempt'>") == 2
    assert "failing attempt 1 of 1" in html  # attempt 1, in the history
    assert "retried" in html and "completed" in html
    assert "earlier attempts&#x27; errors are in the attempt history" in html


def test_the_result_field_is_shown_only_for_jobs_that_keep_one(client, jobs):
    login(client)
    kept = summed.enqueue(key="r1", numbers=[2, 3])
    plain = unstored.enqueue(key="r2")
    jobs.run()
    assert "&quot;sum&quot;: 5" in page(client, kept.id)
    assert "Result:" not in page(client, plain.id)
