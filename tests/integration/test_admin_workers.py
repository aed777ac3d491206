"""The workers page (W8, issue 15): live or stale said in words, in-flight jobs linked
(the detail once showed "-"), no delete of a live worker, a stale one deletable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from tests.testapp.jobs import noop
from ultimate_jobs.models import Worker

pytestmark = pytest.mark.django_db


def worker(worker_id, *, live, in_flight=()):
    now = timezone.now()
    return Worker.objects.create(
        id=worker_id,
        host="h",
        pid=1,
        started_at=now - timedelta(minutes=5),
        queues=["default"],
        slots=4,
        in_flight=[str(i) for i in in_flight],
        heartbeat_at=now,
        expires_at=now + timedelta(seconds=30 if live else -30),
    )


def test_the_workers_pages_say_live_or_stale_and_link_what_runs(client):
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_worker", "delete_worker", "change_job", "view_job"]
        )
    )
    client.force_login(user)
    job = noop.enqueue(key="in-flight")
    live = worker("w-live", live=True, in_flight=[job.id])
    stale = worker("w-stale", live=False)
    listing = client.get(reverse("admin:ultimate_jobs_worker_changelist"))
    html = listing.content.decode()
    assert "stale (no heartbeat within a lease)" in html
    assert ">live<" in html
    detail = client.get(reverse("admin:ultimate_jobs_worker_change", args=[live.pk]))
    assert reverse("admin:ultimate_jobs_job_change", args=[job.id]) in (
        detail.content.decode()
    )
    delete = reverse("admin:ultimate_jobs_worker_delete", args=[live.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert Worker.objects.filter(pk=live.pk).exists()
    delete = reverse("admin:ultimate_jobs_worker_delete", args=[stale.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Worker.objects.filter(pk=stale.pk).exists()
