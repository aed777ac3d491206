"""The one locator (api/locator.py, issue 25 item 4): a job is found on the alias that
holds it (Q1), in the hot table, in the archive (Q2) or staged in the outbox (O1), and
nowhere once gone; ``load`` answers it as a Job from either table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections, transaction

from tests.testapp.jobs import touch
from ultimate_jobs.api import locator
from ultimate_jobs.api.locator import Place, Table
from ultimate_jobs.db import DirectDatabase, DjangoDatabase
from ultimate_jobs.ground.exceptions import JobNotFound
from ultimate_jobs.ground.ids import uuid7
from ultimate_jobs.maintenance import archive
from ultimate_jobs.models import Job, JobArchive
from ultimate_jobs.runtime.relay import Relay

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs_b"])

ROUTED = {"default": {}, "routed": {"database": "jobs_b"}}


@pytest.fixture(autouse=True)
def routed(settings: Any) -> Iterator[None]:
    settings.ULTIMATE_JOBS = {"QUEUES": ROUTED}
    yield
    for alias in ("default", "jobs_b"):  # Django's flush leaves the archive alone
        with connections[alias].cursor() as cursor:
            cursor.execute("TRUNCATE ultimate_jobs_job_archive")


def finish_and_archive(alias: str, job_id: uuid.UUID) -> None:
    """Mark the job done and move it to ``alias``'s archive, as its leader would."""
    Job.objects.using(alias).filter(pk=job_id).update(
        state="done", finished_at=datetime.now(UTC), attempt=1
    )
    moved = archive.move(
        DjangoDatabase(alias),
        after=60.0,
        batch=100,
        max_batches=1,
        now=datetime.now(UTC) + timedelta(minutes=5),
    )
    assert moved.moved == 1


def test_a_job_on_the_default_alias_in_the_hot_table_then_the_archive():
    here = touch.enqueue(key="here", tenant="acme")
    assert locator.where(here.id) == Place("default", Table.HOT)
    assert locator.alias_of(here.id) == "default"
    assert (locator.load(here.id).pk, locator.load(here.id).state) == (here.id, "ready")

    finish_and_archive("default", here.id)

    assert locator.where(here.id) == Place("default", Table.ARCHIVE)
    assert locator.alias_of(here.id) == "default"
    loaded = locator.load(here.id)
    assert (type(loaded), loaded.pk, loaded.state) == (Job, here.id, "done")
    assert JobArchive.objects.filter(pk=here.id).count() == 1


def test_a_routed_job_is_found_on_its_alias_hot_and_archived():
    there = touch.using(queue="routed").enqueue(key="there", tenant="acme")
    assert locator.where(there.id) == Place("jobs_b", Table.HOT)
    assert locator.alias_of(there.id) == "jobs_b"
    assert locator.where(there.id, alias="default") is None
    assert locator.load(there.id).queue == "routed"
    with pytest.raises(JobNotFound):
        locator.load(there.id, alias="default")

    finish_and_archive("jobs_b", there.id)

    assert locator.where(there.id) == Place("jobs_b", Table.ARCHIVE)
    assert locator.alias_of(there.id) == "jobs_b"
    assert locator.load(there.id).state == "done"


def test_a_staged_job_is_in_the_outbox_until_the_relay_publishes_it():
    with transaction.atomic():
        staged = touch.using(queue="routed").enqueue(key="staged", tenant="acme")
        # The caller's transaction sees its own staged row (O1).
        assert locator.where(staged.id) == Place("default", Table.OUTBOX)
    assert locator.where(staged.id) == Place("default", Table.OUTBOX)
    with pytest.raises(JobNotFound):  # staged is not a job yet
        locator.load(staged.id)

    db = DirectDatabase("default", application_name="test locator relay")
    relay = Relay(relay_id="locator", db=db, alias="default")
    try:
        assert relay.run_once().published == 1
    finally:
        db.close()
        for target in relay.publisher.targets.values():
            target.close()

    assert locator.where(staged.id) == Place("jobs_b", Table.HOT)
    assert locator.load(staged.id).pk == staged.id


def test_an_unknown_job_is_nowhere():
    missing = uuid7()
    assert locator.where(missing) is None
    assert locator.alias_of(missing) == "default"  # where the verb then says why
    with pytest.raises(JobNotFound):
        locator.load(missing)
