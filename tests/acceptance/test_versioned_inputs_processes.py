"""P11 across a rolling deploy, with real worker processes: a worker of the previous
deploy hands back a row whose input is newer than its code (untouched, its attempt
not counted), a worker of the next deploy runs that row as stored and upgrades a row
the previous deploy enqueued, instead of dead-lettering it."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from tests.conftest import wait_for
from tests.testapp.models import Record
from tests.testapp.versioned_jobs import parcel_v1
from ultimate_jobs import api
from ultimate_jobs.models import Attempt, Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def events(key):
    return list(
        Record.objects.filter(key=key).order_by("id").values_list("event", "pid")
    )


def row(job_id):
    return Job.objects.values("state", "attempt", "input", "last_error").get(pk=job_id)


def test_a_rolling_deploy_hands_newer_inputs_forward_and_upgrades_older_ones(
    start_worker, monkeypatch
):
    old = start_worker("--concurrency", "2")
    # A row the next deploy enqueued (version 2), while only the old worker runs.
    newer = parcel_v1.using(delay="1h").enqueue(key="newer", address="-, -")
    v2_input = {"key": "newer", "street": "Oak 2", "city": "Delft", "__version__": 2}
    Job.objects.filter(pk=newer.id).update(input=v2_input, state="ready", run_at=Now())
    old.wait_log("jobs.attempt.version-ahead")
    wait_for(lambda: row(newer.id)["state"] == "delayed")
    assert row(newer.id) == {
        "state": "delayed",
        "attempt": 0,
        "input": v2_input,
        "last_error": "",
    }
    assert not Attempt.objects.filter(job_id=newer.id).exists()
    assert events("newer") == []
    # The old deploy's own rows still run on the old worker.
    mine = parcel_v1.enqueue(key="mine", address="Elm 3, Leiden")
    wait_for(lambda: row(mine.id)["state"] == "done")
    assert events("mine") == [("shipped-v1 Elm 3, Leiden", old.pid)]
    # A row of the old deploy the new worker will meet: kept delayed until then.
    older = parcel_v1.using(delay="1h").enqueue(
        key="older", address="Main St 1, Utrecht"
    )

    old.stop()
    monkeypatch.setenv("UJ_TEST_NEXT_DEPLOY", "1")
    new = start_worker("--concurrency", "2")
    api.promote(newer.id)
    api.promote(older.id)
    wait_for(lambda: {row(newer.id)["state"], row(older.id)["state"]} == {"done"})
    assert events("newer") == [("shipped-v2 Oak 2|Delft", new.pid)]
    assert events("older") == [("shipped-v2 Main St 1|Utrecht", new.pid)]
    assert (row(newer.id)["attempt"], row(older.id)["attempt"]) == (1, 1)
    assert row(older.id)["input"] == {"key": "older", "address": "Main St 1, Utrecht"}
