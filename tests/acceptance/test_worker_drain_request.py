"""An operator's drain request (issue 15, W8): the admin's Drain asks a live worker to
stop claiming; the worker honours it at its next heartbeat, finishes the job it runs
(not cancelled, the attempt completes), claims nothing more, and exits 0."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.conftest import deadline, wait_for
from tests.testapp.jobs import hold, noop
from tests.testapp.models import Record
from ultimate_jobs import api
from ultimate_jobs.models import Job, Worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LEASE = 2.0  # the heartbeat runs every third of it


def test_a_drain_requested_from_the_admin_is_honoured_at_the_next_heartbeat(
    start_worker, client
):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_worker", "change_job"])
    )
    client.force_login(user)
    held = hold.enqueue(key="drained", seconds=60.0)
    worker = start_worker("--concurrency", "1", LEASE=f"{LEASE:g}s")
    wait_for(
        lambda: Record.objects.filter(key="drained", event="started").exists(),
        message="the held job started",
    )
    [row] = wait_for(lambda: list(Worker.objects.all()), message="its registry row")
    # A live worker cannot be deleted from the admin.
    delete = reverse("admin:ultimate_jobs_worker_delete", args=[row.pk])
    assert client.get(delete).status_code in (302, 403)
    response = client.post(
        reverse("admin:ultimate_jobs_worker_changelist"),
        {"action": "drain_workers", "_selected_action": [row.pk]},
        follow=True,
    )
    assert [str(m) for m in response.context["messages"]] == [
        f"Worker {row.pk}: drain requested; it stops claiming at its next heartbeat "
        "and exits when its jobs end."
    ]
    worker.wait_log("jobs.worker.drain-requested", timeout=deadline())
    later = noop.enqueue(key="after-drain")
    Record.objects.create(key="drained", event="release")
    assert worker.wait() == 0
    assert Job.objects.get(pk=held.id).state == "done"  # finished, not cancelled
    assert Job.objects.get(pk=later.id).state == "ready"  # never claimed
    assert not Worker.objects.filter(pk=row.pk).exists()  # removed on its clean exit
    assert api.drain_worker(row.pk) is False  # gone: nothing to drain
