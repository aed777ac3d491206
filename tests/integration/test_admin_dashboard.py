"""The admin dashboard and queues page (P7, issue 15): per queue depth by state,
oldest due age, running, dead, paused, throughput and failure rate over the last hour
and day with server-drawn SVG charts; Pause/Resume buttons that record who and wake
the queue; unknown queue names refused; drill-down to the queue's jobs."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.testapp.jobs import flaky, noop, terminal
from ultimate_jobs import api
from ultimate_jobs.api.overview import overview
from ultimate_jobs.models import QueuePause

DASHBOARD = "admin:ultimate_jobs_dashboard_changelist"
QUEUE = "admin:ultimate_jobs_dashboard_queue"


def login(client, *codenames):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_job", *codenames])
    )
    client.force_login(user)
    return user


def said(response):
    return [str(m) for m in response.context["messages"]]


@pytest.mark.django_db
def test_overview_counts_states_depth_and_the_counters_of_the_last_hour(jobs):
    noop.using(queue="mail").enqueue(key="m1")
    noop.using(queue="mail").enqueue(key="m2")
    noop.using(queue="mail", delay="1h").enqueue(key="later")
    terminal.enqueue(key="dies")
    flaky.enqueue(key="retries", fail_times=1)
    jobs.run(queues=["default"])
    numbers = {q["queue"]: q for q in overview()["queues"]}
    mail, default = numbers["mail"], numbers["default"]
    assert mail["states"] | {} == {
        "ready": 2,
        "delayed": 1,
        "running": 0,
        "suspended": 0,
        "dead": 0,
    }
    assert mail["depth"] == 2 and mail["oldest_ready_seconds"] >= 0
    assert default["states"]["dead"] == 1 and default["states"]["delayed"] == 1
    # One dead-lettered attempt and one retried: two failures, no completion yet.
    assert default["hour"] == {"done": 0, "failed": 2, "failure_rate": 1.0}
    assert default["day"]["failed"] == 2
    assert sum(p["failed"] for p in default["series"]) == 2
    assert default["series"][-1]["failed"] == 2  # the current hour
    assert numbers["default"]["declared"] is True


@pytest.mark.django_db
def test_the_dashboard_renders_every_queue_with_a_chart_and_drill_down(client, jobs):
    login(client)
    noop.using(queue="mail").enqueue(key="m1")
    terminal.enqueue(key="dies")
    jobs.run(queues=["default"])
    page = client.get(reverse(DASHBOARD))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-queue="mail"' in html and 'data-queue="default"' in html
    assert '<svg class="uj-chart"' in html
    assert reverse("admin:ultimate_jobs_job_changelist") + "?queue=mail" in html
    assert "?queue=default&amp;state=dead" in html
    assert "uj-pause-mail" not in html  # view only: no buttons
    # The app's index opens with a link to it, above the list of pages.
    index = client.get(reverse("admin:app_list", args=["ultimate_jobs"])).content
    html = index.decode()
    assert html.index('id="uj-open-dashboard"') < html.index('id="content-main"')


@pytest.mark.django_db(transaction=True)
def test_pause_records_who_and_resume_wakes_the_queue(client, second_connection):
    login(client, "change_job")
    noop.using(queue="mail").enqueue(key="m1")
    response = client.post(
        reverse(QUEUE), {"queue": "mail", "verb": "pause"}, follow=True
    )
    assert said(response) == ["Queue 'mail' paused."]
    pause = QueuePause.objects.get(queue="mail")
    assert pause.paused_by == "op (admin)"
    assert "uj-resume-mail" in response.content.decode()
    second_connection.execute("LISTEN ultimate_jobs_wake")
    response = client.post(
        reverse(QUEUE), {"queue": "mail", "verb": "resume"}, follow=True
    )
    assert said(response) == ["Queue 'mail' resumed; its workers were woken."]
    woken = [n.payload for n in second_connection.notifies(timeout=2, stop_after=1)]
    assert woken == ["mail"]
    assert api.paused_queues() == []


@pytest.mark.django_db(transaction=True)
def test_deleting_a_pause_row_resumes_through_the_api_and_wakes(
    client, second_connection
):
    user = login(client, "change_job", "delete_queuepause", "view_queuepause")
    api.pause_queue("mail", by="someone")
    assert user.has_perm("ultimate_jobs.delete_queuepause")
    second_connection.execute("LISTEN ultimate_jobs_wake")
    pause = QueuePause.objects.get(queue="mail")
    url = reverse("admin:ultimate_jobs_queuepause_delete", args=[pause.pk])
    assert client.post(url, {"post": "yes"}).status_code == 302
    woken = [n.payload for n in second_connection.notifies(timeout=2, stop_after=1)]
    assert woken == ["mail"]
    assert api.paused_queues() == []


@pytest.mark.django_db
def test_an_unknown_queue_is_refused_and_buttons_need_change_job(client):
    login(client, "change_job")
    response = client.post(
        reverse(QUEUE), {"queue": "typo-queue", "verb": "pause"}, follow=True
    )
    assert said(response) == [
        "Queue 'typo-queue' is not declared by any job nor used by any row; "
        "nothing was paused or resumed."
    ]
    assert api.paused_queues() == []


@pytest.mark.django_db
def test_a_viewer_cannot_pause(client):
    login(client)
    response = client.post(reverse(QUEUE), {"queue": "default", "verb": "pause"})
    assert response.status_code == 403
    assert api.paused_queues() == []


@pytest.mark.django_db
def test_retry_dead_requeues_a_queues_dead_jobs_bounded_and_recorded(
    client, jobs, monkeypatch
):
    from ultimate_jobs.api import verbs

    login(client, "change_job")
    monkeypatch.setattr(verbs, "BULK_LIMIT", 2)
    dead = [terminal.enqueue(key=f"d{i}") for i in range(3)]
    jobs.run()
    html = client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="uj-retry-dead-default"' in html
    response = client.post(
        reverse(QUEUE), {"queue": "default", "verb": "retry-dead"}, follow=True
    )
    assert said(response) == [
        "Queue 'default', retry dead: 2 jobs retried, 0 refused, 1 not reached "
        "(at most 1000 per action; run it again for the rest)."
    ]
    states = sorted(api.get(d.id)["state"] for d in dead)
    assert states == ["dead", "ready", "ready"]
    assert all(
        a["actor"]["source"] == "admin" for d in dead for a in api.job_actions(d.id)
    )


@pytest.mark.django_db
def test_counters_of_a_name_nobody_declares_or_keeps_count_under_a_question_mark(
    client,
):
    from django.utils import timezone

    from ultimate_jobs.models import JobCounter

    login(client, "change_job")
    JobCounter.objects.create(
        name="retired.job",
        tier=60,
        bucket=timezone.now().replace(second=0, microsecond=0),
        done=3,
        dead=1,
    )
    numbers = {q["queue"]: q for q in overview()["queues"]}
    assert numbers["?"]["hour"] == {"done": 3, "failed": 1, "failure_rate": 0.25}
    html = client.get(reverse(DASHBOARD)).content.decode()
    assert 'data-queue="?"' in html and 'id="uj-pause-?"' not in html
