"""The hot door (db.py ``DirectDatabase.hot``): a worker's claims and batched
completions run below the cursor (N2) and answer exactly what ``run`` answers, with
the statement prepared on the connection or, behind a pooler in transaction mode
(``PREPARED_STATEMENTS = False``), parsed per call; a row Python cannot read is left
out, named and buried, the others held (B4)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from tests.testapp.jobs import noop
from ultimate_jobs.conf import load_settings
from ultimate_jobs.db import DirectDatabase
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.sql import arrays
from ultimate_jobs.sql.rows import JOB_CLAIM_PLAIN, JOB_COMPLETE, ClaimedJob

pytestmark = pytest.mark.django_db(transaction=True)


def claim(db: DirectDatabase, door: str) -> list[ClaimedJob]:
    rows: list[ClaimedJob] = getattr(db, door)(
        JOB_CLAIM_PLAIN,
        queues=arrays.texts(["default"]),
        limit=1,
        worker_id="w-hot",
        lease_seconds=30.0,
        names=arrays.texts([noop.name]),
        now=None,
    )
    return rows


def prepared_names(db: DirectDatabase) -> list[str]:
    cursor = db.connect().execute("SELECT name FROM pg_prepared_statements")
    return sorted(name for (name,) in cursor.fetchall() if name.startswith("uj_"))


@pytest.mark.parametrize("prepared", [True, False])
def test_the_hot_door_answers_what_run_answers_prepared_or_not(prepared: bool) -> None:
    ids = [noop.enqueue(key=key).id for key in ("a", "b", "c")]
    with override_settings(ULTIMATE_JOBS={"PREPARED_STATEMENTS": prepared}):
        db = DirectDatabase("default")
        try:
            [cold] = claim(db, "run")
            [hot] = claim(db, "hot")
            [again] = claim(db, "hot")  # the prepared statement's second run
            landed = db.hot(
                JOB_COMPLETE,
                ids=arrays.uuids([hot["id"], again["id"]]),
                lease_owners=arrays.uuids([hot["lease_owner"], cold["lease_owner"]]),
                progresses=arrays.jsonbs([None, None]),
                now=None,
            )
            names = prepared_names(db)
        finally:
            db.close()
    assert names == (["uj_job_claim_plain", "uj_job_complete"] if prepared else [])
    assert [cold["id"], hot["id"], again["id"]] == ids
    # The same columns in the same order, each value of the same type.
    shape: dict[str, Any] = {key: type(value) for key, value in cold.items()}
    assert {key: type(value) for key, value in hot.items()} == shape
    row = Job.objects.get(id=hot["id"])
    assert (hot["run_id"], hot["attempt"], hot["created_at"]) == (
        row.run_id,
        1,
        row.created_at,
    )
    assert hot["started_at"] == row.started_at and hot["refused"] is False
    assert isinstance(hot["input"], str) and json.loads(hot["input"]) == row.input
    # The completion is fenced per row (W3): the second id came with another token.
    assert landed == [{"id": hot["id"], "away_parent_id": None}]
    states = dict(Job.objects.filter(id__in=ids).values_list("id", "state"))
    assert states == {ids[0]: "running", ids[1]: "done", ids[2]: "running"}


def test_a_worker_claim_buries_an_unreadable_row_and_holds_the_others() -> None:
    first, bad, last = (noop.enqueue(key=key) for key in ("1", "2", "3"))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ultimate_jobs_job SET created_at = '10000-01-01 00:00:00+00'"
            " WHERE id = %s",
            [bad.id],
        )
    worker = Worker(settings=load_settings({}), queues=["default"], concurrency=4)
    try:
        assert worker.run_once() == 2  # no pool runs: the two rows stay held
        assert sorted(worker.ledger.ids()) == sorted([first.id, last.id])
    finally:
        worker.db.close()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, error_code, lease_owner FROM ultimate_jobs_job WHERE id = %s",
            [bad.id],
        )
        assert cursor.fetchone() == ("dead", "X_ROW_UNREADABLE", None)
