"""The API's verbs refuse what PostgreSQL cannot hold (B4, issue 31 item 3): a NUL or
a lone surrogate in cancel_by_key, pause_task, resume_task, trigger and bulk's filters
is a coded InvalidArgument naming the field, raised before any statement (so the
caller's transaction is untouched); bulk validates its queue; a cron with a Unicode
digit is an InvalidCron in recur and @task."""

from __future__ import annotations

import pytest
from django.db import transaction

from tests.testapp.jobs import noop
from ultimate_jobs import api, recur
from ultimate_jobs.ground.exceptions import (
    InvalidArgument,
    InvalidCron,
    InvalidQueueName,
)
from ultimate_jobs.models import Job, Schedule
from ultimate_jobs.observability import counters
from ultimate_jobs.scheduling.schedules import pause_task, resume_task, trigger
from ultimate_jobs.scheduling.tasks import task

pytestmark = pytest.mark.django_db

NUL, SURROGATE, ARABIC_ONE = "a\x00b", "a\ud800b", "\u0661"


def refused_in_a_transaction(call, field):
    """The refusal names ``field`` and leaves the caller's transaction usable."""
    with transaction.atomic():
        with pytest.raises(InvalidArgument) as caught:
            call()
        assert caught.value.field == field
        assert caught.value.code.startswith("X_")
        assert Job.objects.count() == 0  # the transaction still answers


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda bad: api.cancel_by_key(bad, "k"), "name"),
        (lambda bad: api.cancel_by_key(noop.name, bad), "key"),
        (lambda bad: api.cancel_by_key(noop.name, "k", tenant=bad), "tenant"),
        (lambda bad: pause_task(bad), "task"),
        (lambda bad: resume_task(bad), "task"),
        (lambda bad: trigger(bad), "task"),
        (lambda bad: api.bulk("cancel", state="ready", tenant_id=bad), "tenant_id"),
        (lambda bad: api.bulk("cancel", state="ready", name=bad), "name"),
        (lambda bad: api.bulk("cancel", state="ready", queue=bad), "queue"),
        (lambda bad: api.find_job(bad), "id"),
        (lambda bad: counters.totals(since="1h", name=bad), "name"),
    ],
)
def test_the_verbs_refuse_text_postgresql_cannot_hold(call, field, bad):
    refused_in_a_transaction(lambda: call(bad), field)


def test_bulk_validates_its_queue():
    with pytest.raises(InvalidQueueName) as caught:
        api.bulk("cancel", state="ready", queue="Not A Queue")
    assert caught.value.field == "queue"


@pytest.mark.parametrize("cron", [f"{ARABIC_ONE} * * * *", f"0 {ARABIC_ONE} * * *"])
def test_a_unicode_digit_in_a_cron_is_coded_in_recur_and_task(cron):
    with pytest.raises(InvalidCron) as caught:
        recur(noop, {"key": "x"}, cron=cron, tz="UTC", schedule_key="digits")
    assert caught.value.code == "X_INVALID_CRON"
    assert not Schedule.objects.exists()
    with pytest.raises(InvalidCron):

        @task(cron=cron, tz="UTC", name="digits.task")
        def digits(occurrence):  # pragma: no cover - never declared
            return []
