"""Runtime schedules (C6) and the operator verbs (C7): recur/unrecur, the admin form
checked with the same errors as @task, edits taking effect at the next tick, pause,
resume and run now from the admin, task_fires and next_run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.conftest import wait_for
from tests.testapp.jobs import noop, touch, typed
from ultimate_jobs import (
    InvalidCron,
    InvalidJobPayload,
    InvalidTimezone,
    TaskDeclarationInvalid,
    UnknownJob,
    UnknownTask,
    next_run,
    recur,
    task,
    task_fires,
    task_registry,
    unrecur,
)
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job, Schedule, TaskWatermark
from ultimate_jobs.runtime.wake import Wake
from ultimate_jobs.scheduling.scheduler import Scheduler
from ultimate_jobs.testing.factories import ScheduleFactory

T0 = datetime(2025, 6, 2, 8, 0, 30, tzinfo=UTC)


def scheduler(holder="a", wake=None):
    return Scheduler(
        db=DjangoDatabase("default"),
        holder=holder,
        wake=wake,
        settings=load_settings({}),
    )


def keys():
    return sorted(Job.objects.values_list("idempotency_key", flat=True))


@pytest.mark.django_db
def test_recur_twice_with_one_key_leaves_one_schedule_the_second():
    first = recur(noop, {"key": "d1"}, cron="0 9 * * *", tz="UTC", schedule_key="d-1")
    second = recur(
        "testapp.noop",
        {"key": "d1"},
        cron="0 10 * * mon-fri",
        tz="Europe/Paris",
        schedule_key="d-1",
        catch_up="run-all",
    )
    assert second.pk == first.pk
    row = Schedule.objects.get()
    assert (row.key, row.job, row.cron, row.tz, row.catch_up) == (
        "d-1",
        "testapp.noop",
        "0 10 * * mon-fri",
        "Europe/Paris",
        "run-all",
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"cron": "61 * * * *"}, InvalidCron),
        ({"tz": "Bogota"}, InvalidTimezone),
        ({"job": "testapp.nope"}, UnknownJob),
        ({"input": {"key": "x", "extra": 1}}, InvalidJobPayload),
        ({"catch_up": "sometimes"}, TaskDeclarationInvalid),
        ({"schedule_key": "a-task"}, TaskDeclarationInvalid),
    ],
)
def test_recur_refuses_what_task_refuses_and_writes_nothing(change, error):
    @task(cron="* * * * *", tz="UTC", name="a-task")
    def a_task(occurrence):
        return []

    try:
        args = {
            "job": noop,
            "input": {"key": "x"},
            "cron": "* * * * *",
            "tz": "UTC",
            "schedule_key": "s",
            **change,
        }
        with pytest.raises(error):
            recur(args.pop("job"), args.pop("input"), **args)
        assert Schedule.objects.count() == 0
        with pytest.raises(InvalidCron, match="minute: 61 is out of range"):
            ScheduleFactory.create(
                key="k", job="testapp.noop", cron="61 * * * *", tz="UTC"
            )
    finally:
        task_registry.unregister("a-task")


@pytest.mark.django_db
def test_a_schedule_fires_like_a_task_and_unrecur_stops_it():
    recur(noop, {"key": "s1"}, cron="*/5 * * * *", tz="UTC", schedule_key="every5")
    s = scheduler()
    s.run_once(now=T0)
    [fire] = s.run_once(now=T0 + timedelta(minutes=5))
    assert fire.key == "schedule:every5"
    assert keys() == ["s1@2025-06-02T08:05Z"]
    assert unrecur("every5") is True
    assert unrecur("every5") is False
    assert not TaskWatermark.objects.filter(key="schedule:every5").exists()
    # The leader still held it: the fire finds no watermark, reads back, drops it.
    assert s.run_once(now=T0 + timedelta(minutes=10)) == []
    assert s.run_once(now=T0 + timedelta(minutes=15)) == []
    assert keys() == ["s1@2025-06-02T08:05Z"]


@pytest.mark.django_db
@pytest.mark.usefixtures("without_app_purge")
def test_an_edit_is_noticed_at_the_next_lease_renewal_when_no_notification_comes():
    recur(noop, {"key": "r"}, cron="0 0 1 1 *", tz="UTC", schedule_key="rev")
    s = scheduler()
    s.run_once(now=T0)
    schedule = Schedule.objects.get()
    schedule.cron = "* * * * *"
    schedule.save()  # its NOTIFY waits for a commit that never comes in this test
    s.run_once(now=T0 + timedelta(seconds=5))
    assert TaskWatermark.objects.get().spec == "0 0 1 1 * UTC"
    s.run_once(now=T0 + timedelta(seconds=10))  # the renewal answers a new revision
    assert TaskWatermark.objects.get().spec == "* * * * * UTC"
    [fire] = s.run_once(now=T0 + timedelta(seconds=31))
    assert fire.occurrence == datetime(2025, 6, 2, 8, 1, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_a_schedule_edited_in_the_admin_takes_effect_on_the_next_tick(admin_client):
    wake = Wake("default").start()
    try:
        s = scheduler(wake=wake)
        s.listen()
        wait_for(wake.proven.is_set, message="the wake session")
        recur(
            touch,
            {"key": "old", "tenant": "t"},
            cron="0 0 1 1 *",
            tz="UTC",
            schedule_key="ed",
        )
        start = datetime.now(UTC).replace(second=30, microsecond=0)
        s.run_once(now=start)
        row = Schedule.objects.get()
        page = admin_client.post(
            reverse("admin:ultimate_jobs_schedule_change", args=[row.pk]),
            {
                "key": "ed",
                "job": "testapp.touch",
                "input": '{"key": "new", "tenant": "acme"}',
                "cron": "* * * * *",
                "tz": "UTC",
                "catch_up": "skip",
                "max_catch_up": "10",
                "description": "",
            },
        )
        assert page.status_code == 302, page.content.decode()[:2000]

        def reloaded():  # the next tick, once the notification arrived
            s.run_once(now=start + timedelta(seconds=1))
            return TaskWatermark.objects.get(key="schedule:ed").spec == "* * * * * UTC"

        wait_for(reloaded, timeout=10, message="the leader to reload the schedule")
        # Only this schedule's fire: the app's hourly purge fires too when the minute
        # crossed is the hour's.
        fires = s.run_once(now=start + timedelta(seconds=31))
        [fire] = [f for f in fires if f.key == "schedule:ed"]
        job = Job.objects.get(pk=fire.job_ids[0])
        assert job.input == {"key": "new", "tenant": "acme"}
        assert job.idempotency_key == "new@" + fire.occurrence.strftime(
            "%Y-%m-%dT%H:%MZ"
        )
    finally:
        wake.stop()


@pytest.mark.django_db
def test_the_admin_form_shows_the_same_errors_and_saves_nothing(admin_client):
    url = reverse("admin:ultimate_jobs_schedule_add")
    assert admin_client.get(url).status_code == 200
    page = admin_client.post(
        url,
        {
            "key": "bad",
            "job": "testapp.typed",
            "input": '{"key": "x"}',
            "cron": "61 * * * *",
            "tz": "Bogota",
            "catch_up": "skip",
            "max_catch_up": "10",
        },
    )
    assert page.status_code == 200
    html = page.content.decode().replace("&#x27;", "'")
    assert "X_INVALID_CRON: cron='61 * * * *': minute: 61 is out of range 0-59" in html
    assert "did you mean 'America/Bogota'?" in html
    assert "count=None: required parameter is missing" in html  # typed(count=...)
    assert Schedule.objects.count() == 0
    page = admin_client.post(
        url,
        {
            "key": "good",
            "job": typed.name,
            "input": '{"key": "x", "count": 2}',
            "cron": "*/15 9-17 * * mon-fri",
            "tz": "America/Bogota",
            "catch_up": "run-once",
            "max_catch_up": "10",
        },
    )
    assert page.status_code == 302
    assert Schedule.objects.get().cron == "*/15 9-17 * * mon-fri"
    listing = admin_client.get(reverse("admin:ultimate_jobs_schedule_changelist"))
    assert "good" in listing.content.decode()


@pytest.fixture
def operator(client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_schedule", "view_taskwatermark", "change_schedule"]
        )
    )
    client.force_login(user)
    return user


@pytest.mark.django_db
def test_pause_resume_and_run_now_from_the_admin_are_permission_checked_and_audited(
    client, operator
):
    schedule = recur(noop, {"key": "n"}, cron="0 9 * * *", tz="UTC", schedule_key="ops")
    url = reverse("admin:ultimate_jobs_schedule_changelist")
    for action in ("pause", "run_now"):
        page = client.post(url, {"action": action, "_selected_action": [schedule.pk]})
        assert page.status_code == 302
    mark = TaskWatermark.objects.get(key="schedule:ops")
    assert (mark.paused, mark.paused_by) == (True, "op (admin)")
    assert keys() == ["n"]  # run now: the job's own key, not an occurrence's
    assert LogEntry.objects.filter(change_message="pause via admin").count() == 1
    # The task-fires page needs the change permission on it for its actions.
    fires = reverse("admin:ultimate_jobs_taskwatermark_changelist")
    assert client.get(fires).status_code == 200
    page = client.post(fires, {"action": "resume", "_selected_action": [mark.pk]})
    assert TaskWatermark.objects.get(key="schedule:ops").paused is True
    operator.user_permissions.add(
        Permission.objects.get(codename="change_taskwatermark")
    )
    operator = User.objects.get(pk=operator.pk)
    client.force_login(operator)
    client.post(fires, {"action": "resume", "_selected_action": [mark.pk]})
    assert TaskWatermark.objects.get(key="schedule:ops").paused is False
    leases = reverse("admin:ultimate_jobs_leaderlease_changelist")
    assert client.get(leases).status_code == 403  # no view permission on leases


@pytest.mark.django_db
def test_task_fires_and_next_run_need_no_running_scheduler():
    @task(cron="0 3 * * *", tz="Europe/Paris", name="nightly")
    def nightly(occurrence):
        return [(noop, {"key": "nightly"})]

    try:
        recur(
            noop, {"key": "w"}, cron="30 2 * * *", tz="Europe/Paris", schedule_key="w"
        )
        before = {f.name: f for f in task_fires()}
        assert (before["nightly"].fires, before["nightly"].last_fired_at) == (0, None)
        assert before["w"].kind == "schedule"
        # The spring switch: 03:00 exists; 02:30 does not and fires at 03:00 (C2).
        eve = datetime(2025, 3, 29, 12, tzinfo=UTC)
        assert next_run(nightly, eve).isoformat() == "2025-03-30T03:00:00+02:00"
        assert next_run("w", eve).isoformat() == "2025-03-30T03:00:00+02:00"
        with pytest.raises(UnknownTask):
            next_run("nothing-by-this-name")
        s = scheduler()
        s.run_once(now=eve)
        s.run_once(now=eve + timedelta(days=1))
        after = {f.name: f for f in task_fires()}
        assert after["nightly"].fires == 1
        assert after["nightly"].last_occurrence == datetime(2025, 3, 30, 1, tzinfo=UTC)
        assert after["w"].last_occurrence == datetime(2025, 3, 30, 1, tzinfo=UTC)
    finally:
        task_registry.unregister("nightly")
