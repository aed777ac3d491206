"""Loud misconfiguration (issue 30): every common mistake answers with a coded error or
a warning that says what to do, rather than work that waits in silence.

The process-level refusals (a worker before ``migrate``, an enqueue without the app or
on SQLite, ``tasks`` modules discovered) are in tests/acceptance/test_misconfiguration_processes.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from tests.integration.test_archive_readers import empty_archive, move_finished
from tests.testapp.jobs import noop, touch
from ultimate_jobs import NO_TENANT, job
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground.exceptions import UnknownJob, UnknownQueue
from ultimate_jobs.models import Job, Worker
from ultimate_jobs.runtime.heartbeat import MAX_NAMES, Beat
from ultimate_jobs.runtime.held import Ledger
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.worker import Worker as RuntimeWorker

DASHBOARD = "admin:ultimate_jobs_dashboard_changelist"
DB = DjangoDatabase("default")
__all__ = ["empty_archive"]  # the fixture, used by name


def test_an_unknown_queue_at_using_names_the_closest_when_queues_are_explicit(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ["default", "emails"]}
    with pytest.raises(UnknownQueue) as refused:
        touch.using(queue="emials")
    assert refused.value.code == "X_UNKNOWN_QUEUE"
    assert refused.value.field == "queue" and refused.value.value == "emials"
    assert "did you mean 'emails'?" in str(refused.value)
    assert touch.using(queue="emails").options.queue == "emails"


def test_any_valid_queue_is_accepted_at_using_without_explicit_queues(settings):
    settings.ULTIMATE_JOBS = {}
    assert touch.using(queue="emials").options.queue == "emials"


@pytest.mark.django_db
def test_an_unknown_queue_writes_nothing(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ["default"]}
    with pytest.raises(UnknownQueue):
        touch.using(queue="defualt").enqueue(key="k")
    assert not Job.objects.exists()


def test_an_unknown_job_name_names_the_closest_declared_one():
    with pytest.raises(UnknownJob) as refused:
        registry.get("testapp.tuoch")
    assert "did you mean 'testapp.touch'?" in str(refused.value)
    with pytest.raises(UnknownJob) as far:
        registry.get("zzz")
    assert "did you mean" not in str(far.value)


@pytest.mark.django_db
@pytest.mark.parametrize("queues", ["emials", "default,emials"])
def test_jobs_worker_refuses_a_queue_nobody_declares(queues):
    with pytest.raises(CommandError) as refused:
        call_command("jobs_worker", "--queues", queues)
    message = str(refused.value)
    assert message.startswith("X_UNKNOWN_QUEUE: --queues='emials'")
    assert "no worker serves it" in message and "(declared: " in message
    assert "default" in message[message.index("(declared: ") :]


@pytest.mark.django_db
def test_jobs_worker_names_the_closest_declared_queue(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ["default", "emails"]}
    with pytest.raises(CommandError, match=r"did you mean 'emails'\?"):
        call_command("jobs_worker", "--queues", "emials")


def live_worker(queues: list[str], names: list[str] | None = None) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        id=f"w-{'-'.join(queues)}-{len(names or ())}",
        host="h",
        pid=1,
        started_at=now,
        queues=queues,
        names=names,
        slots=1,
        heartbeat_at=now,
        expires_at=now + timedelta(minutes=5),
    )


@pytest.mark.django_db
def test_the_dashboard_warns_of_due_jobs_no_live_worker_serves(client, clean_registry):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    live_worker(["default"], names=registry.names())
    noop.enqueue(key="served")
    noop.using(queue="emials").enqueue(key="nobody")

    @job(name="tests.vanished", idempotency_key=lambda p: p["key"], tenant=NO_TENANT)
    def vanished(run, key: str) -> None: ...

    vanished.enqueue(key="v")
    registry.unregister("tests.vanished")  # a name no code of this deploy declares
    page = client.get(reverse(DASHBOARD)).content.decode()
    assert page.count('class="uj-warning"') == 2
    assert "Queue <a href" in page and "<code>emials</code></a> has due jobs" in page
    assert (
        "Job <code>tests.vanished</code> (queue <code>default</code>) has due jobs "
        "and none of the 1 live worker serving the queue declares it"
    ) in page
    assert "<code>default</code></a> has due jobs" not in page

    live_worker(["emials"])
    Job.objects.filter(name="tests.vanished").delete()
    page = client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="uj-unserved"' not in page


@pytest.mark.django_db
def test_the_jobs_list_points_to_the_archive_once_finished_jobs_moved_there(
    client, jobs, empty_archive
):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    jobs_list = reverse("admin:ultimate_jobs_job_changelist")
    archive = reverse("admin:ultimate_jobs_jobarchive_changelist")
    page = client.get(jobs_list).content.decode()
    assert 'id="uj-archive-note"' not in page  # nothing archived yet
    assert f'href="{archive}">Archive</a>' in page  # the object tools link it always
    noop.enqueue(key="finished")
    jobs.run()
    assert move_finished() == 1
    page = client.get(jobs_list).content.decode()
    note = page[page.index('id="uj-archive-note"') :]
    assert note.startswith(
        'id="uj-archive-note">This list holds live jobs and those finished in the last 1m;'
    )
    assert f'<a href="{archive}">the archive</a>' in note


@pytest.mark.django_db
def test_the_dashboard_names_a_job_no_live_worker_serving_its_queue_declares(client):
    """Issue 30: the web process declares both names; the workers' registry rows say
    which they run. A name one serving worker declares is served; a name none of them
    declares waits, and is named; a worker that recorded no names may serve any."""
    client.force_login(User.objects.create_superuser("root", password="pw"))
    live_worker(["default"], names=["testapp.noop"])
    live_worker(["default", "other"], names=["testapp.noop", "testapp.touch"])
    noop.enqueue(key="served")
    touch.enqueue(key="t", tenant="a")  # declared by the second worker only
    touch.using(queue="other").enqueue(key="o", tenant="a")  # served there too
    page = client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="uj-unserved"' not in page

    Worker.objects.filter(queues__contains=["other"]).update(names=["testapp.noop"])
    page = client.get(reverse(DASHBOARD)).content.decode()
    warnings = page[page.index('id="uj-unserved"') : page.index("</ul>")]
    assert warnings.count('class="uj-warning"') == 2
    assert (
        "Job <code>testapp.touch</code> (queue <code>default</code>) has due jobs and "
        "none of the 2 live workers serving the queue declares it: deploy the code"
    ) in warnings
    assert (
        "Job <code>testapp.touch</code> (queue <code>other</code>) has due jobs and "
        "none of the 1 live worker serving the queue declares it"
    ) in warnings
    assert "testapp.noop" not in warnings

    live_worker(["default", "other"], names=None)  # an earlier version: any name
    page = client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="uj-unserved"' not in page


@pytest.mark.django_db
def test_a_worker_records_the_names_it_declares_when_it_registers():
    """Issue 30: the registry row holds the names the worker claims, written at its
    insert only (a later beat leaves them), and none past MAX_NAMES."""
    worker = RuntimeWorker(settings=load_settings({}), queues=["default"])
    worker.heartbeat.run_once(DB)  # type: ignore[arg-type]
    row = Worker.objects.get(pk=worker.worker_id)
    assert row.names == registry.names() and "testapp.touch" in row.names
    Worker.objects.filter(pk=row.pk).update(names=["changed"])
    worker.heartbeat.run_once(DB)  # type: ignore[arg-type]
    assert Worker.objects.get(pk=row.pk).names == ["changed"]

    many = [f"n{i}" for i in range(MAX_NAMES + 1)]
    beat = Beat(
        Ledger(),
        worker_id="w-many",
        queues=["default"],
        slots=1,
        lease=30.0,
        every=10.0,
        lifecycle=Lifecycle(),
        names=many,
    )
    beat.run_once(DB)  # type: ignore[arg-type]
    assert Worker.objects.get(pk="w-many").names is None
    beat = Beat(
        Ledger(),
        worker_id="w-most",
        queues=["default"],
        slots=1,
        lease=30.0,
        every=10.0,
        lifecycle=Lifecycle(),
        names=many[:MAX_NAMES],
    )
    beat.run_once(DB)  # type: ignore[arg-type]
    assert Worker.objects.get(pk="w-most").names == many[:MAX_NAMES]
