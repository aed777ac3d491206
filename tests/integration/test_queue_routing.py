"""Queues routed to database aliases (Q1), in one process on real PostgreSQL: where an
enqueue writes, get and cancel by id on the routed alias, and the outbox across
aliases (staged on the caller's alias, delivered into the queue's exactly once)."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.testapp.durable_jobs import await_payment, events
from tests.testapp.jobs import noop, touch
from ultimate_jobs import api, publish_event
from ultimate_jobs.db import DirectDatabase, DjangoDatabase
from ultimate_jobs.durable.events import reset_events
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import Event, Job, JobAction, OutboxMessage, OutboxReceipt
from ultimate_jobs.runtime.relay import Relay
from ultimate_jobs.testing import JobsTestRunner

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}
ADMIN_ID = re.compile(r'<code class="uj-id" title="([0-9a-f-]{36})">')


@pytest.fixture
def routed(settings):
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}


@pytest.fixture
def relay_of():
    """A relay claiming one alias's outbox, on its own connection; closed at the end."""
    made: list[tuple[Relay, DirectDatabase]] = []

    def make(alias: str, relay_id: str = "r") -> Relay:
        db = DirectDatabase(alias, application_name=f"test relay {relay_id}")
        relay = Relay(relay_id=relay_id, db=db, alias=alias)
        made.append((relay, db))
        return relay

    yield make
    for relay, db in made:
        db.close()
        for target in relay.publisher.targets.values():
            target.close()


def ids(alias: str) -> set[uuid.UUID]:
    return set(Job.objects.using(alias).values_list("id", flat=True))


def test_an_enqueue_writes_only_to_its_queues_alias(routed):
    """Q1: a routed queue's job lands in that alias's tables, any other on DATABASE."""
    here = touch.enqueue(key="here", tenant="acme")
    there = touch.using(queue="routed").enqueue(key="there", tenant="acme")
    assert ids("default") == {here.id}
    assert ids("jobs_b") == {there.id}
    assert Job.objects.using("jobs_b").get().queue == "routed"


def test_enqueue_many_writes_a_routed_batch_in_one_statement_on_its_alias(routed):
    """Q1, H3: the batch goes to its queue's alias in one statement; dedupe by key
    holds there as on DATABASE (J2)."""
    batch = [{"key": f"k{i}", "tenant": "acme"} for i in range(5)]
    with CaptureQueriesContext(connections["jobs_b"]) as seen:
        first = touch.using(queue="routed").enqueue_many(batch)
    inserts = [
        q for q in seen.captured_queries if "INSERT INTO ultimate_jobs_job" in q["sql"]
    ]
    assert len(inserts) == 1
    again = touch.using(queue="routed").enqueue_many(batch)
    assert [a.id for a in again] == [a.id for a in first]
    assert all(a.deduped for a in again)
    assert ids("jobs_b") == {a.id for a in first}
    assert ids("default") == set()


def test_get_and_cancel_by_id_find_a_job_on_a_routed_alias(routed):
    """Q1: the id is enough; the reads and the cancel look on every alias."""
    there = touch.using(queue="routed").enqueue(key="there", tenant="acme")
    assert api.get(there.id)["queue"] == "routed"
    api.cancel(there.id, "not needed")
    assert Job.objects.using("jobs_b").get().state == "cancelled"
    assert api.get(there.id)["state"] == "cancelled"
    assert not Job.objects.using("default").exists()


def test_a_transactional_enqueue_stages_on_the_callers_alias(routed):
    """Q1, O1: staged in the transaction the caller holds, on its alias; a rollback
    removes it there."""
    with transaction.atomic():  # the caller's transaction is on "default"
        staged = touch.using(queue="routed").enqueue(key="s", tenant="acme")
    with pytest.raises(RuntimeError), transaction.atomic():
        touch.using(queue="routed").enqueue(key="gone", tenant="acme")
        raise RuntimeError
    assert list(
        OutboxMessage.objects.using("default").values_list("id", flat=True)
    ) == [staged.id]
    with transaction.atomic(using="jobs_b"):  # a transaction on the queue's own alias
        own = touch.using(queue="routed").enqueue(key="own", tenant="acme")
    assert OutboxMessage.objects.using("jobs_b").get().id == own.id
    assert ids("default") == ids("jobs_b") == set()


def test_the_relay_delivers_into_the_queues_alias_exactly_once(routed, relay_of):
    """Q1, O2: the staged row's id is the dedupe key in the target (its receipt). A
    pass that delivered but never marked (a relay killed in between) delivers nothing
    the second time, even after the job finished and its row was purged."""
    with transaction.atomic():
        staged = [
            touch.using(queue="routed").enqueue(key=f"k{i}", tenant="acme")
            for i in range(3)
        ]
        local = noop.enqueue(key="local")
    relay = relay_of("default")
    done = relay.run_once()
    assert (done.claimed, done.inserted, done.published) == (4, 4, 4)
    assert ids("jobs_b") == {s.id for s in staged}
    assert ids("default") == {local.id}
    assert set(OutboxReceipt.objects.using("jobs_b").values_list("id", flat=True)) == {
        s.id for s in staged
    }
    # As if killed before its mark: the rows are pending again, and the jobs are gone.
    OutboxMessage.objects.using("default").update(
        published_at=None, claimed_at=None, claimed_by=None
    )
    Job.objects.using("jobs_b").filter(pk=staged[0].id).delete()
    again = relay.run_once()
    assert (again.claimed, again.published) == (4, 4)
    assert again.inserted == 0
    assert ids("jobs_b") == {s.id for s in staged[1:]}
    assert not OutboxMessage.objects.using("default").filter(published_at=None).exists()


def test_a_relay_of_the_routed_alias_publishes_its_own_outbox(routed, relay_of):
    """Q1: each alias's relay claims its own outbox; a row of a queue on that alias is
    published there with the plain enqueue statement (no receipt needed)."""
    with transaction.atomic(using="jobs_b"):
        own = touch.using(queue="routed").enqueue(key="own", tenant="acme")
    assert relay_of("default").run_once().claimed == 0
    done = relay_of("jobs_b", "rb").run_once()
    assert (done.claimed, done.inserted, done.published) == (1, 1, 1)
    assert ids("jobs_b") == {own.id}
    assert not OutboxReceipt.objects.using("jobs_b").exists()


def test_retry_promote_and_remove_by_id_act_on_the_routed_alias(routed):
    """Q1, P2: the by-id verbs move the job where it lives, and record who did it
    there."""
    later = touch.using(queue="routed", delay="1h").enqueue(key="later", tenant="acme")
    api.promote(later.id, actor="ops")
    assert Job.objects.using("jobs_b").get(pk=later.id).state == "ready"
    api.cancel(later.id, "wrong input", actor="ops")
    run_id = api.retry(later.id, actor="ops")
    job = Job.objects.using("jobs_b").get(pk=later.id)
    assert (job.state, job.run_id) == ("ready", run_id)
    api.cancel(later.id, "again", actor="ops")
    api.remove(later.id, actor="ops")
    assert not Job.objects.using("jobs_b").exists()
    assert not Job.objects.using("default").exists()
    actions = JobAction.objects.using("jobs_b").order_by("id")
    assert [a.action for a in actions] == [
        "promote",
        "cancel",
        "retry",
        "cancel",
        "remove",
    ]
    assert not JobAction.objects.using("default").exists()


def test_an_event_reaches_the_wait_of_a_job_on_a_routed_alias(settings):
    """Q1, S4: every alias has its own events; a publication is written on each, so
    the wait of a job on a routed alias is woken and answered there."""
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    answer = await_payment.using(queue="routed").enqueue(key="w", order="o-1")
    # run it as jobs_b's worker would: a runner over that alias, serving the queue
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs_b"}
    assert [str(a.outcome) for a in JobsTestRunner().run(queues=["routed"])] == [
        "suspended"
    ]
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    published = publish_event("order.paid", {"order": "o-1", "amount": 4})
    assert published.woken == 1  # the wait on jobs_b
    assert [Event.objects.using(a).count() for a in ("default", "jobs_b")] == [1, 1]
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs_b"}
    assert [str(a.outcome) for a in JobsTestRunner().run(queues=["routed"])] == [
        "completed"
    ]
    assert events("w") == ["asked", "asked", "paid:4"]
    assert Job.objects.using("jobs_b").get(pk=answer.id).state == "done"
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    assert reset_events() == 2  # the seam between tests forgets them on every alias


def test_a_publication_in_a_transaction_reaches_other_aliases_when_it_commits(routed):
    """Q1, S4: the other aliases get the event after the caller's commit, and a
    rolled-back publication reaches none."""
    with transaction.atomic():
        publish_event("order.paid", {"order": "o-2"})
        assert Event.objects.using("jobs_b").count() == 0
    assert [Event.objects.using(a).count() for a in ("default", "jobs_b")] == [1, 1]
    with pytest.raises(RuntimeError), transaction.atomic():
        publish_event("order.paid", {"order": "o-3"})
        raise RuntimeError("rolled back")
    assert [Event.objects.using(a).count() for a in ("default", "jobs_b")] == [1, 1]


def test_a_routed_job_in_the_archive_is_read_and_retried_on_its_alias(settings):
    """Q1, Q2: each alias moves its own finished jobs to its own archive; a read and a
    retry by id find the job there, and the retry brings it back to that alias."""
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    there = touch.using(queue="routed").enqueue(key="moved", tenant="acme")
    settings.ULTIMATE_JOBS = {"DATABASE": "jobs_b"}  # as jobs_b's worker and leader
    try:
        done = JobsTestRunner().run(queues=["routed"])
        assert [str(a.outcome) for a in done] == ["completed"]
        finished = Job.objects.using("jobs_b").get(pk=there.id).finished_at
        assert finished is not None
        moved = archive.move(
            DjangoDatabase("jobs_b"),
            after=60.0,
            batch=100,
            max_batches=1,
            now=finished + timedelta(minutes=2),
        )
        assert moved.moved == 1
        settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
        assert ids("jobs_b") == set()
        assert api.get(there.id)["state"] == "done"
        api.retry(there.id)
        assert ids("jobs_b") == {there.id}
        assert ids("default") == set()
        assert Job.objects.using("jobs_b").get(pk=there.id).state == "ready"
    finally:
        with connections["jobs_b"].cursor() as cursor:
            cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def test_the_admin_lists_each_aliass_jobs_with_a_database_filter_and_column(
    client, routed
):
    """Q1: the job list offers a database filter and column when queues live on
    several aliases; a routed job's page opens by its id; an unknown alias is refused."""
    user = User.objects.create_user("op", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    here = touch.enqueue(key="here", tenant="acme")
    there = touch.using(queue="routed").enqueue(key="there", tenant="acme")
    listed = reverse("admin:ultimate_jobs_job_changelist")

    def shown(**params: str) -> tuple[list[str], str]:
        response = client.get(listed, params)
        assert response.status_code == 200, response.content[:500]
        page = response.content.decode()
        return ADMIN_ID.findall(page), page

    found, page = shown()
    assert found == [str(here.id)]
    assert "?database=jobs_b" in page  # the filter offers every alias
    assert 'class="column-database"' in page
    found, page = shown(database="jobs_b")
    assert found == [str(there.id)]
    assert '<td class="field-database">jobs_b</td>' in page
    opened = client.get(
        reverse("admin:ultimate_jobs_job_change", args=[there.id]), follow=True
    )
    assert opened.status_code == 200 and str(there.id) in opened.content.decode()
    refused = client.get(listed, {"database": "nope"})
    assert refused.status_code == 302 and "e=1" in refused["Location"]
