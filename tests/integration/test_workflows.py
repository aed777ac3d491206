"""run.spawn and run.wait_for_jobs (S10, S11) with the testing runner, in one process
on real PostgreSQL. The worker processes (SIGKILL, concurrency 1) are in
tests/acceptance/test_workflow_processes.py."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tests.testapp.workflow_jobs import fan_in, square
from ultimate_jobs import FanInTimeout, InvalidArgument, JobState, api
from ultimate_jobs.models import Job, JobStep

pytestmark = pytest.mark.django_db


def result_of(job_id):
    return Job.objects.get(pk=job_id).result


def test_children_are_spawned_waited_for_and_answered_in_order(jobs):
    parent = fan_in.enqueue(key="k", count=3)
    outcomes = [str(a.outcome) for a in jobs.run()]
    # the parent suspends, its three children complete, the last one wakes it
    assert outcomes == ["suspended", "completed", "completed", "completed", "completed"]
    children = list(Job.objects.filter(parent_id=parent.id).order_by("id"))
    assert [c.input["n"] for c in children] == [0, 1, 2]
    assert {c.enqueued_by for c in children} == {f"job:{parent.id}"}
    assert result_of(parent.id) == {
        "ids": [str(c.id) for c in children],
        "states": ["done"] * 3,
        "sum": 0 + 1 + 4,
        "errors": [],
    }
    steps = JobStep.objects.filter(job_id=parent.id).order_by("id")
    assert [(s.name, s.kind, s.status) for s in steps] == [
        ("child:0", "spawn", "done"),
        ("child:1", "spawn", "done"),
        ("child:2", "spawn", "done"),
        ("children", "jobs", "done"),
    ]


def test_a_replay_answers_the_same_children(jobs):
    parent = fan_in.enqueue(key="r", count=2)
    [attempt] = jobs.run(until_idle=False)
    assert str(attempt.outcome) == "suspended"
    first = set(Job.objects.filter(parent_id=parent.id).values_list("id", flat=True))
    api.promote(parent.id)  # the parent replays before its children ran
    [attempt] = jobs.run(until_idle=False, queues=["default"], max_jobs=None) or [None]
    assert Job.objects.filter(name=square.name).count() == 2
    assert (
        set(Job.objects.filter(parent_id=parent.id).values_list("id", flat=True))
        == first
    )


def test_a_dead_child_is_answered_with_its_error(jobs):
    parent = fan_in.enqueue(key="d", count=2, fail=[1])
    jobs.run()
    # the failing child's first failure is retried; the parent waits on
    failing = Job.objects.get(parent_id=parent.id, input__n=1)
    assert (failing.state, Job.objects.get(pk=parent.id).state) == (
        "delayed",
        "suspended",
    )
    jobs.travel(seconds=2)  # the failing child's retry
    jobs.run()
    assert result_of(parent.id) == {
        "ids": [
            str(i)
            for i in Job.objects.filter(parent_id=parent.id)
            .order_by("id")
            .values_list("id", flat=True)
        ],
        "states": ["done", "dead"],
        "sum": 0,
        "errors": ["builtins.ValueError: child 1 fails"],
    }


def test_the_wait_times_out(jobs):
    parent = fan_in.enqueue(key="t", count=1, timeout=30.0, child_gate="")
    [first] = jobs.run(until_idle=False)
    assert str(first.outcome) == "suspended"
    Job.objects.filter(parent_id=parent.id).update(
        state=JobState.DELAYED, run_at="2999-01-01T00:00:00Z"
    )
    jobs.travel(seconds=31)
    [attempt] = jobs.run()
    assert isinstance(attempt.error, FanInTimeout)
    assert attempt.outcome == "dead-lettered"
    step = JobStep.objects.get(job_id=parent.id, name="children")
    assert step.status == "timed_out"


def test_cancelling_a_parent_cancels_its_live_children(jobs):
    parent = fan_in.enqueue(key="c", count=3)
    jobs.run(until_idle=False)
    api.cancel(parent.id)
    states = set(
        Job.objects.filter(parent_id=parent.id).values_list("state", flat=True)
    )
    assert states == {"cancelled"}
    assert Job.objects.get(pk=parent.id).state == "cancelled"


def test_jobs_show_and_list_name_the_parent_and_the_children(jobs):
    parent = fan_in.enqueue(key="s", count=2)
    jobs.run(until_idle=False)
    children = [
        str(i)
        for i in Job.objects.filter(parent_id=parent.id)
        .order_by("id")
        .values_list("id", flat=True)
    ]
    shown = api.get(parent.id)
    assert (shown["parent_id"], shown["children"]) == (None, children)
    assert shown["children_by_state"] == {"ready": 2}
    assert api.get(children[0])["parent_id"] == str(parent.id)
    out = StringIO()
    call_command("jobs", "list", "--parent", str(parent.id), "--json", stdout=out)
    assert sorted(j["id"] for j in json.loads(out.getvalue())["jobs"]) == children
    with pytest.raises(InvalidArgument) as refused:
        api.list_jobs(parent="nope")
    assert refused.value.field == "parent"


def test_spawn_many_writes_a_batch_and_a_replay_answers_it(jobs):
    parent = fan_in.enqueue(key="m", count=5, batch=2)
    [attempt] = jobs.run(until_idle=False)
    assert str(attempt.outcome) == "suspended"
    steps = list(
        JobStep.objects.filter(job_id=parent.id)
        .order_by("id")
        .values_list("name", "output")
    )
    children = list(Job.objects.filter(parent_id=parent.id).order_by("id"))
    assert [name for name, _ in steps] == [
        "chunk:0[0]",
        "chunk:0[1]",
        "chunk:2[0]",
        "chunk:2[1]",
        "chunk:4[0]",
        "children",
    ]
    assert [out["id"] for _, out in steps[:5] if out] == [str(c.id) for c in children]
    api.promote(parent.id)  # a replay before the children ran: the same five
    jobs.run()
    assert Job.objects.filter(name=square.name).count() == 5
    assert result_of(parent.id)["sum"] == 0 + 1 + 4 + 9 + 16
    assert result_of(parent.id)["ids"] == [str(c.id) for c in children]


def test_spawn_refuses_what_is_not_a_job(jobs, clean_registry):
    from ultimate_jobs import NO_TENANT, job

    @job(name="tests.bad_spawn", idempotency_key=lambda p: "k", tenant=NO_TENANT)
    def bad_spawn(run):
        run.spawn("child", print, x=1)

    bad_spawn.enqueue()
    [attempt] = jobs.run()
    assert isinstance(attempt.error, InvalidArgument)
    assert attempt.error.field == "handle"
    assert JobStep.objects.count() == 0


def admin_page(client, path):
    from django.contrib.auth.models import Permission, User

    user, _ = User.objects.get_or_create(username="op", defaults={"is_staff": True})
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def test_the_job_page_links_a_parent_and_its_children_both_ways(client, jobs):
    from django.urls import reverse

    from ultimate_jobs.admin import job_family

    parent = fan_in.enqueue(key="a", count=job_family.CHILDREN_SHOWN + 5, fail=[1])
    jobs.run(until_idle=False)
    jobs.run(max_jobs=3)  # three children done, one of them failed once (retrying)
    children = list(Job.objects.filter(parent_id=parent.id).order_by("id"))
    html = admin_page(
        client, reverse("admin:ultimate_jobs_job_change", args=[parent.id])
    )
    total = job_family.CHILDREN_SHOWN + 5
    assert f"{total} children:" in html
    assert (
        f'parent={parent.id}&amp;state=done" class="uj-children-state">2 done</a>'
        in html
    )
    assert f'class="uj-children-state">{total - 3} ready</a>' in html
    assert 'class="uj-children-state">1 delayed</a>' in html
    shown = children[: job_family.CHILDREN_SHOWN]
    for child in shown:
        assert reverse("admin:ultimate_jobs_job_change", args=[child.id]) in html
    # past the first few: the filtered list has it
    last = reverse("admin:ultimate_jobs_job_change", args=[children[-1].id])
    assert last not in html
    assert (
        f'?parent={parent.id}" class="uj-all-children">all {total} children</a>' in html
    )
    child_html = admin_page(
        client, reverse("admin:ultimate_jobs_job_change", args=[children[0].id])
    )
    assert reverse("admin:ultimate_jobs_job_change", args=[parent.id]) in child_html
    assert "testapp.fan_in (suspended)" in child_html
    listing = admin_page(
        client, reverse("admin:ultimate_jobs_job_changelist") + f"?parent={parent.id}"
    )
    assert last in listing
    assert reverse("admin:ultimate_jobs_job_change", args=[parent.id]) not in listing


def test_outcomes_are_read_from_the_archive_too(jobs, django_db_blocker):
    """Q2: children moved to the archive while their parent waited are answered from
    there, and keep their parent_id."""
    from datetime import timedelta

    from ultimate_jobs.db import DjangoDatabase
    from ultimate_jobs.maintenance import archive
    from ultimate_jobs.models import JobArchive

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")
    parent = fan_in.enqueue(key="arch", count=3, fail=[2])
    jobs.run(max_jobs=4)  # the parent, its children: two done, one to retry
    jobs.travel(seconds=2)
    jobs.run(max_jobs=1)  # the last child: dead, and the parent is due
    assert Job.objects.get(pk=parent.id).state == "suspended"
    finished = Job.objects.filter(parent_id=parent.id).order_by("id")
    ids = [str(i) for i in finished.values_list("id", flat=True)]
    latest = max(t for t in finished.values_list("finished_at", flat=True) if t)
    moved = archive.move(
        DjangoDatabase("default"),
        after=60.0,
        batch=1000,
        max_batches=10,
        now=latest + timedelta(minutes=2),
    )
    assert moved.moved == 3
    assert Job.objects.filter(parent_id=parent.id).count() == 0
    assert JobArchive.objects.filter(parent_id=parent.id).count() == 3
    assert api.get(parent.id)["children"] == ids
    [attempt] = jobs.run()
    assert str(attempt.outcome) == "completed"
    assert result_of(parent.id) == {
        "ids": ids,
        "states": ["done", "done", "dead"],
        "sum": 0 + 1,
        "errors": ["builtins.ValueError: child 2 fails"],
    }
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def test_a_spawned_child_is_announced_like_any_enqueue(jobs):
    from ultimate_jobs.ground.signals import job_enqueued

    heard = []

    def receiver(sender, enqueued, **kwargs):
        heard.append((sender, enqueued.id))

    parent = fan_in.enqueue(key="sig", count=2)
    job_enqueued.connect(receiver)
    try:
        jobs.run(until_idle=False)
    finally:
        job_enqueued.disconnect(receiver)
    children = Job.objects.filter(parent_id=parent.id).order_by("id")
    assert heard == [(square, c.id) for c in children]


def test_a_child_keeps_its_own_tenant_rule_and_limits(jobs):
    """S10: a tenant rule answering None takes the parent's tenant, one answering a
    tenant keeps it; a keyed concurrency limit is computed as for any enqueue (L2)."""
    from tests.testapp.jobs import per_account
    from tests.testapp.workflow_jobs import shop_child, shop_parent

    parent = shop_parent.enqueue(shop="acme", accounts=["a1", "a1"])
    jobs.run(until_idle=False)
    by_n = {c.input["n"]: c.tenant_id for c in Job.objects.filter(name=shop_child.name)}
    assert by_n == {0: "acme", 1: "elsewhere"}
    direct = per_account.enqueue(key="direct", account="a1")
    keys = set(
        Job.objects.filter(name=per_account.name).values_list(
            "concurrency_key", flat=True
        )
    )
    assert len(keys) == 1 and None not in keys  # the same key as a direct enqueue
    assert Job.objects.filter(parent_id=parent.id).count() == 4
    assert Job.objects.get(pk=direct.id).parent_id is None
