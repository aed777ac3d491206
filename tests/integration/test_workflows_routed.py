"""Children on another database alias (Q1, S10, S11) with the testing runner: staged in
the parent's outbox, published on jobs_b, and cancelled with their parent. The worker
processes are in tests/acceptance/test_workflow_processes.py."""

from __future__ import annotations

import pytest

from tests.testapp.workflow_jobs import fan_in_polling, square
from ultimate_jobs import api
from ultimate_jobs.models import Job, OutboxMessage

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}


@pytest.fixture(autouse=True)
def routed(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}


def test_cancelling_a_parent_cancels_its_children_on_another_alias(jobs):
    parent = fan_in_polling.enqueue(key="far", count=2, queue="routed")
    [attempt] = jobs.run(until_idle=False)
    assert str(attempt.outcome) == "suspended"
    assert jobs.relay() == 2  # staged with the spawns, published on jobs_b
    children = Job.objects.using("jobs_b").filter(name=square.name)
    assert sorted(children.values_list("state", flat=True)) == ["ready", "ready"]
    assert set(children.values_list("parent_id", flat=True)) == {None}
    api.cancel(parent.id)
    assert sorted(children.values_list("state", flat=True)) == ["cancelled"] * 2
    assert Job.objects.filter(name=square.name).count() == 0


def test_cancelling_a_parent_drops_its_children_still_staged_in_the_outbox(jobs):
    parent = fan_in_polling.enqueue(key="staged", count=2, queue="routed")
    [attempt] = jobs.run(until_idle=False)
    assert str(attempt.outcome) == "suspended"
    staged = OutboxMessage.objects.filter(name=square.name, published_at__isnull=True)
    assert staged.count() == 2  # not relayed yet
    api.cancel(parent.id)
    assert Job.objects.get(pk=parent.id).state == "cancelled"
    assert jobs.relay() == 2  # both rows retired: the relay marks them, writes no job
    assert staged.count() == 0
    assert Job.objects.using("jobs_b").filter(name=square.name).count() == 0
    assert Job.objects.filter(name=square.name).count() == 0
