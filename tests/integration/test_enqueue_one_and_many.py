"""The two write statements of an enqueue (issue 26, N2) and the checks answered once.

* One by one: ``job_enqueue_one``, the row's columns as scalar parameters; a batch:
  ``job_enqueue``, which answers only the ordinals of the rows it did not write (the
  ids are the client's). Both answer the same handles, dedupe (J1, J2) exactly as
  before: within a batch, against a live row, ids and ``deduped`` flags exact.
* ``ensure_jobs_database`` is answered once per alias and forgotten when a test
  changes INSTALLED_APPS or DATABASES; the aliases the outbox looks at follow the
  settings (O1, Q1).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.signals import setting_changed
from django.db import connections, transaction
from django.test import override_settings

from tests.testapp.jobs import anything, noop, touch
from ultimate_jobs import REDACTED, Enqueued
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.enqueue.options import written
from ultimate_jobs.enqueue.rows import array_params, build_rows, scalar_params
from ultimate_jobs.ground.exceptions import (
    AppNotInstalled,
    OutboxNoTx,
    UnsupportedDatabase,
)
from ultimate_jobs.models import Job, OutboxMessage
from ultimate_jobs.sql.rows import JOB_ENQUEUE, JOB_ENQUEUE_ONE

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])


def stored() -> dict[str, tuple[object, object]]:
    return {j.idempotency_key: (j.id, j.run_id) for j in Job.objects.all()}


def test_one_by_one_answers_the_row_it_wrote_or_the_live_holder():
    """J1, J2: the id answered is the row's; a held key answers the holder's ids."""
    first = touch.enqueue(key="a", tenant="acme")
    other_tenant = touch.enqueue(key="a", tenant="umbrella")  # J3: per tenant
    again = touch.enqueue(key="a", tenant="acme")
    assert not first.deduped
    assert not other_tenant.deduped
    assert again == Enqueued(first.id, first.run_id, deduped=True)
    assert Job.objects.count() == 2
    assert {(j.tenant_id, j.id, j.run_id) for j in Job.objects.all()} == {
        ("acme", first.id, first.run_id),
        ("umbrella", other_tenant.id, other_tenant.run_id),
    }


def test_a_batch_answers_in_order_with_duplicates_within_it_and_against_a_live_row():
    held = noop.enqueue(key="k1")
    answers = noop.enqueue_many(
        [{"key": "k0"}, {"key": "k1"}, {"key": "k0"}, {"key": "k2"}, {"key": "k1"}]
    )
    k0, k2 = answers[0], answers[3]
    assert answers == [
        Enqueued(k0.id, k0.run_id, deduped=False),
        Enqueued(held.id, held.run_id, deduped=True),
        Enqueued(k0.id, k0.run_id, deduped=True),
        Enqueued(k2.id, k2.run_id, deduped=False),
        Enqueued(held.id, held.run_id, deduped=True),
    ]
    assert stored() == {
        "k0": (k0.id, k0.run_id),
        "k1": (held.id, held.run_id),
        "k2": (k2.id, k2.run_id),
    }


def test_job_enqueue_answers_only_the_rows_it_did_not_write():
    """One answer row: the 1-based ordinals of the rows a live key held, in order."""
    noop.enqueue(key="held")
    rows = build_rows(
        noop, [{"key": "new"}, {"key": "held"}, {"key": "new"}, {"key": "also"}]
    )
    db = DjangoDatabase("default")
    [answer] = db.run(JOB_ENQUEUE, now=None, **array_params(rows))
    assert answer["deduped"] == [2, 3]
    [none_held] = db.run(
        JOB_ENQUEUE, now=None, **array_params(build_rows(noop, [{"key": "x"}]))
    )
    assert none_held["deduped"] == []
    assert set(stored()) == {"held", "new", "also", "x"}


def test_a_batch_hides_a_nested_secret_in_the_key_after_flat_inputs():
    """B5: the shown key skips the walk only for an input that cannot hold a hidden
    value (flat, no hidden key); a nested one under a REDACT pattern is still found,
    row by row in one batch, and a hidden top-level key too (issue 26)."""
    rows = build_rows(
        anything,
        [
            {"key": "plain:1", "value": 1},
            {"key": "nested:hunter22", "value": {"password": "hunter22"}},
            {"key": "listed:s3cr3t-v", "value": [{"secret": "s3cr3t-v"}]},
            {"key": "plain:2", "value": "hunter22"},
        ],
    )
    assert [row.shown_key for row in rows] == [
        None,
        f"nested:{REDACTED}",
        f"listed:{REDACTED}",
        None,
    ]


def test_a_column_shared_by_the_batch_travels_once_and_reaches_every_row():
    """job_enqueue_many: a column of one value down the batch is a one-element array,
    which every row takes; a column that differs stays per row (issue 26)."""
    shared = build_rows(touch.using(priority=5), [{"key": "s1", "tenant": "acme"}] * 3)
    params = array_params(shared, shared=True)
    assert len(array_params(shared)["name"].values) == 3  # job_enqueue: whole arrays
    assert [len(params[name].values) for name in ("name", "tenant_id", "priority")] == [
        1,
        1,
        1,
    ]
    assert len(params["id"].values) == len(params["idempotency_key"].values) == 3
    touch.using(priority=5).enqueue_many(
        [{"key": "s1", "tenant": "acme"}, {"key": "s2", "tenant": "acme"}]
    )
    touch.enqueue_many(
        [
            {"key": "m1", "tenant": "acme"},
            {"key": "m2", "tenant": "umbrella"},
            {"key": "m3", "tenant": "acme"},
        ]
    )
    rows = {
        j.idempotency_key: (j.name, j.queue, j.priority, j.tenant_id, j.state)
        for j in Job.objects.all()
    }
    name, queue = touch.name, touch.definition.queue
    assert rows == {
        "s1": (name, queue, 5, "acme", "ready"),
        "s2": (name, queue, 5, "acme", "ready"),
        "m1": (name, queue, 0, "acme", "ready"),
        "m2": (name, queue, 0, "umbrella", "ready"),
        "m3": (name, queue, 0, "acme", "ready"),
    }


def test_a_written_answer_equals_the_dataclass_made_one():
    """``written`` fills the slots directly (issue 26): the same Enqueued."""
    [row] = build_rows(noop, [{"key": "w"}])
    made = written(row.id, row.run_id)
    assert made == Enqueued(row.id, row.run_id)
    assert hash(made) == hash(Enqueued(row.id, row.run_id, deduped=False))
    assert repr(made) == repr(Enqueued(row.id, row.run_id))


def test_job_enqueue_one_answers_whether_its_row_was_written():
    db = DjangoDatabase("default")
    [row] = build_rows(noop, [{"key": "one"}])
    [written] = db.run(JOB_ENQUEUE_ONE, now=None, **scalar_params(row))
    [twin] = build_rows(noop, [{"key": "one"}])
    [held] = db.run(JOB_ENQUEUE_ONE, now=None, **scalar_params(twin))
    assert written["inserted"] is True
    assert held["inserted"] is False
    assert stored() == {"one": (row.id, row.run_id)}


@pytest.mark.parametrize(
    "offset", [timedelta(hours=20), timedelta(hours=-23, minutes=-30)]
)
def test_one_by_one_keeps_the_instant_of_run_at_whatever_its_offset(offset):
    """Python allows offsets up to 24 h, PostgreSQL reads none past 15:59: the one-row
    statement sends run_at in UTC, as the arrays do."""
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(offset))
    one = noop.using(run_at=when).enqueue(key="later")
    many = noop.using(run_at=when).enqueue_many([{"key": "b1"}, {"key": "b2"}])
    runs = {j.id: (j.run_at, j.state) for j in Job.objects.all()}
    expected = (when.astimezone(UTC), "delayed")
    assert runs == {one.id: expected, many[0].id: expected, many[1].id: expected}


def test_a_delay_counts_from_now_on_the_one_row_path():
    before = datetime.now(UTC)
    one = noop.using(delay=3600).enqueue(key="d")
    job = Job.objects.get(id=one.id)
    assert job.state == "delayed"
    assert before + timedelta(seconds=3599) < job.run_at < before + timedelta(hours=2)


def _forget_databases() -> None:
    """What the end of a test's change of DATABASES sends (override_settings)."""
    setting_changed.send(sender=None, setting="DATABASES", value=None, enter=False)


def test_the_fit_of_a_database_is_answered_per_alias(settings, monkeypatch):
    """The check is remembered per alias: one found PostgreSQL says nothing of another,
    which is still refused before any SQL (nothing written)."""
    settings.ULTIMATE_JOBS = {
        "QUEUES": {"default": {}, "routed": {"database": "jobs_b"}}
    }
    _forget_databases()
    touch.enqueue(key="here", tenant="acme")  # "default" checked, and remembered
    monkeypatch.setattr(connections["jobs_b"], "vendor", "sqlite")
    with pytest.raises(UnsupportedDatabase, match="DATABASES\\['jobs_b'\\] is sqlite"):
        touch.using(queue="routed").enqueue(key="there", tenant="acme")
    with pytest.raises(UnsupportedDatabase):
        touch.using(queue="routed").enqueue_many([{"key": "b", "tenant": "acme"}])
    assert touch.enqueue(key="again", tenant="acme").deduped is False
    assert not Job.objects.using("jobs_b").exists()
    monkeypatch.undo()


def test_a_changed_installed_apps_is_seen_by_the_next_enqueue():
    """The remembered check is forgotten when INSTALLED_APPS changes (setting_changed):
    without the app an enqueue is refused before any SQL, and works again after."""
    noop.enqueue(key="before")  # checked, and remembered
    from django.conf import settings as django_settings

    apps = [app for app in django_settings.INSTALLED_APPS if app != "ultimate_jobs"]
    with override_settings(INSTALLED_APPS=apps), pytest.raises(AppNotInstalled):
        noop.enqueue(key="during")
    assert noop.enqueue(key="after").deduped is False
    assert set(stored()) == {"before", "after"}


def test_the_aliases_the_outbox_looks_at_follow_the_settings(settings):
    """O1, Q1: inside a transaction on an alias without jobs tables an enqueue is
    refused; once a route gives that alias jobs tables, it stages there."""
    settings.ULTIMATE_JOBS = {}
    with pytest.raises(OutboxNoTx), transaction.atomic(using="jobs_b"):
        touch.enqueue(key="refused", tenant="acme")
    settings.ULTIMATE_JOBS = {
        "QUEUES": {"default": {}, "routed": {"database": "jobs_b"}}
    }
    with transaction.atomic(using="jobs_b"):
        staged = touch.enqueue(key="staged", tenant="acme")
    assert OutboxMessage.objects.using("jobs_b").get().id == staged.id
    assert not Job.objects.exists()


def test_one_by_one_through_djangos_cursor_when_queries_are_logged():
    """While queries are logged (DEBUG, CaptureQueriesContext) the one-row statement
    goes through Django's cursor, which binds the scalars into the text: same row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    when = datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=20)))
    with CaptureQueriesContext(connection) as seen:
        first = touch.using(run_at=when).enqueue(key="logged", tenant="acme")
        again = touch.enqueue(key="logged", tenant="acme")
    inserts = [
        q for q in seen.captured_queries if "INSERT INTO ultimate_jobs_job" in q["sql"]
    ]
    assert len(inserts) == 2
    assert again == Enqueued(first.id, first.run_id, deduped=True)
    job = Job.objects.get()
    assert (job.id, job.run_id, job.run_at, job.tenant_id) == (
        first.id,
        first.run_id,
        when,
        "acme",
    )
