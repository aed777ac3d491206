"""Children on another database alias (Q1, S10, S11) with the testing runner: staged in
the parent's outbox, published on jobs_b with their parent_id, listed with the parent's
children, cancelled with their parent, and their last settle wakes the parent on its
own alias. The worker processes are in tests/acceptance/test_workflow_processes.py."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from tests.integration.test_workflows import admin_page
from tests.testapp.workflow_jobs import fan_in, fan_in_polling, square
from ultimate_jobs import api
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.models import Job, JobStep, OutboxMessage
from ultimate_jobs.runtime.acks import Acks
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql.rows import Fence

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
    assert set(children.values_list("parent_id", flat=True)) == {parent.id}
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


def spawned_far(jobs, key, count=2):
    """A fan_in parent (event_poll 60 s) on default, suspended on its wait, with its
    ``count`` children relayed to jobs_b; answers the parent's handle and the children
    (oldest first)."""
    parent = fan_in.enqueue(key=key, count=count, queue="routed")
    [attempt] = jobs.run(until_idle=False)
    assert str(attempt.outcome) == "suspended"
    assert jobs.relay() == count
    children = list(Job.objects.using("jobs_b").filter(name=square.name).order_by("id"))
    assert len(children) == count
    return parent, children


def test_children_on_another_alias_carry_their_parent_and_show_lists_them(jobs):
    parent, children = spawned_far(jobs, "shown")
    ids = [str(c.id) for c in children]
    assert {c.parent_id for c in children} == {parent.id}
    assert OutboxMessage.objects.filter(parent_id=parent.id).count() == 2
    shown = api.get(parent.id)  # what jobs show --json prints
    assert shown["children"] == ids
    assert shown["children_by_state"] == {"ready": 2}
    out = StringIO()
    call_command("jobs", "show", str(parent.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["children"] == ids


def test_children_on_another_alias_are_in_the_parent_filtered_list(jobs):
    parent, children = spawned_far(jobs, "list")
    ids = [str(c.id) for c in children]
    # api.list_jobs(parent=): keyset pages across the aliases, newest first
    first = api.list_jobs(parent=parent.id, limit=1)
    assert [j["id"] for j in first["jobs"]] == [ids[1]]
    second = api.list_jobs(parent=parent.id, limit=1, after=first["next"])
    assert [j["id"] for j in second["jobs"]] == [ids[0]]
    assert second["next"] is None
    assert second["previous"] == ids[0]
    assert api.list_jobs(parent=parent.id, state="done")["jobs"] == []
    out = StringIO()
    call_command("jobs", "list", "--parent", str(parent.id), "--json", stdout=out)
    assert sorted(j["id"] for j in json.loads(out.getvalue())["jobs"]) == ids


def test_children_on_another_alias_are_on_the_parents_job_page(jobs, client):
    parent, children = spawned_far(jobs, "page")
    html = admin_page(
        client, reverse("admin:ultimate_jobs_job_change", args=[parent.id])
    )
    assert "2 children:" in html
    assert 'class="uj-children-state">2 ready</a>' in html
    for child in children:
        assert reverse("admin:ultimate_jobs_job_change", args=[child.id]) in html
    # The count links to the job list of the alias the children live on (the list
    # shows DATABASE's jobs unless ?database= names another): it lists them.
    changelist = reverse("admin:ultimate_jobs_job_changelist")
    link = f"{changelist}?parent={parent.id}&state=ready&database=jobs_b"
    assert f'href="{link.replace("&", "&amp;")}"' in html
    listed = admin_page(client, link)
    for child in children:
        assert str(child.id) in listed


def test_children_on_two_aliases_are_counted_and_linked_per_alias(jobs, client):
    """Q1: a parent whose children live on default and on jobs_b shows each alias's
    counts and one "all" link per alias."""
    parent, _far = spawned_far(jobs, "two-aliases")
    near = square.enqueue(key="near-child", n=3)
    Job.objects.filter(pk=near.id).update(parent_id=parent.id)
    html = admin_page(
        client, reverse("admin:ultimate_jobs_job_change", args=[parent.id])
    )
    assert "3 children:" in html
    assert 'class="uj-children-state">1 ready on default</a>' in html
    assert 'class="uj-children-state">2 ready on jobs_b</a>' in html
    assert 'class="uj-all-children">all 1 child on default</a>' in html
    assert 'class="uj-all-children">all 2 children on jobs_b</a>' in html


def settle_on_b(child, settler_or_acks):
    """Claim ``child`` on jobs_b by hand (running under a fresh token) and complete
    it through the worker's writer given (a Settler or an Acks batch)."""
    token = child.run_id  # any uuid: the fence only needs to match
    Job.objects.using("jobs_b").filter(pk=child.id).update(
        state="running", lease_owner=token, attempt=1, started_at=timezone.now()
    )
    fence: Fence = {"id": child.id, "lease_owner": token}
    if isinstance(settler_or_acks, Acks):
        assert settler_or_acks.add(fence)
        assert settler_or_acks.close(timeout=10)
    else:
        assert settler_or_acks.complete(fence)


@pytest.mark.parametrize("writer", ["settler", "acks"])
def test_the_last_child_on_another_alias_wakes_its_parent_there(jobs, writer):
    """S11, Q1: the worker that settles the last child on jobs_b makes the parent on
    default due at once (its event_poll is 60 s): not on the first of two."""
    parent, children = spawned_far(jobs, f"wake-{writer}")
    far = timezone.now() + timedelta(seconds=30)
    assert Job.objects.get(pk=parent.id).run_at > far  # parked until its poll
    db = DirectDatabase("jobs_b")
    try:
        settle_on_b(children[0], Settler(db, alias="jobs_b"))
        assert Job.objects.get(pk=parent.id).run_at > far  # a sibling is still live
        [wait] = JobStep.objects.filter(job_id=parent.id, kind="jobs")
        assert not wait.woken
        if writer == "acks":
            settle_on_b(children[1], Acks(db, alias="jobs_b"))
        else:
            settle_on_b(children[1], Settler(db, alias="jobs_b"))
    finally:
        db.close()
    woken = Job.objects.get(pk=parent.id)
    assert woken.state == "suspended"
    assert woken.run_at <= timezone.now()  # due now, not at its poll
    [wait] = JobStep.objects.filter(job_id=parent.id, kind="jobs")
    assert wait.woken
    jobs.run(until_idle=False)  # the parent, claimed at once: its wait is over
    wait.refresh_from_db()
    assert wait.status == "done"
    assert [o["state"] for o in wait.output or []] == ["done", "done"]


def test_a_wake_that_finds_the_parent_running_flags_its_wait(jobs):
    """The parent is between its check and its suspension when the last child settles
    on jobs_b: the wait is flagged woken, so the suspension parks it due now."""
    parent, children = spawned_far(jobs, "racing")
    Job.objects.filter(pk=parent.id).update(state="running")
    db = DirectDatabase("jobs_b")
    try:
        for child in children:
            settle_on_b(child, Settler(db, alias="jobs_b"))
    finally:
        db.close()
    [wait] = JobStep.objects.filter(job_id=parent.id, kind="jobs")
    assert wait.woken
    assert Job.objects.get(pk=parent.id).run_at > timezone.now()  # not touched


def test_a_wake_that_fails_leaves_the_settle_and_the_poll(jobs, monkeypatch, caplog):
    """Best-effort: the parent's database refusing the wake fails nothing; the child
    is settled, the failure logged, and the parent keeps its poll (the guarantee)."""
    from ultimate_jobs.ground.exceptions import QueryError
    from ultimate_jobs.runtime import parents

    class Unreachable(DirectDatabase):
        def run(self, query, /, **params):
            raise QueryError(query.name, RuntimeError("connection refused"))

    parent, children = spawned_far(jobs, "refused", count=1)
    monkeypatch.setattr(parents, "DirectDatabase", Unreachable)
    db = DirectDatabase("jobs_b")
    try:
        settle_on_b(children[0], Settler(db, alias="jobs_b"))
    finally:
        db.close()
    assert Job.objects.using("jobs_b").get(pk=children[0].id).state == "done"
    assert Job.objects.get(pk=parent.id).run_at > timezone.now()
    assert "jobs.fanin.wake-failed" in [r.getMessage() for r in caplog.records]


def test_cancelling_the_last_child_on_another_alias_wakes_its_parent(jobs):
    """S11, Q1: an operator's cancel of the last live child on jobs_b makes the parent
    on default due at once, as a worker's settle would; not the first of two."""
    parent, children = spawned_far(jobs, "cancel-wake")
    far = timezone.now() + timedelta(seconds=30)
    api.cancel(children[0].id, "not needed")
    assert Job.objects.get(pk=parent.id).run_at > far  # a sibling is still live
    api.cancel(children[1].id, "not needed")
    woken = Job.objects.get(pk=parent.id)
    assert woken.state == "suspended"
    assert woken.run_at <= timezone.now()
    jobs.run(until_idle=False)
    [wait] = JobStep.objects.filter(job_id=parent.id, kind="jobs")
    assert wait.status == "done"
    assert [o["state"] for o in wait.output or []] == ["cancelled", "cancelled"]
