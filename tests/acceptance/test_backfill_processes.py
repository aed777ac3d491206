"""A backfill across real worker processes (F1, B3): a worker SIGKILLed in the middle of
a batch; the next worker resumes AT that batch, and every row is handled exactly once
(the kill landed before the batch's writes; handle is at least once per batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import deadline, wait_for
from tests.testapp.backfill_jobs import KEY, records_backfill
from tests.testapp.models import Record
from ultimate_jobs.models import BackfillLedger, Job, JobStep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def test_a_worker_killed_mid_pass_is_resumed_at_its_batch(
    start_worker, tmp_path, monkeypatch
):
    monkeypatch.setenv("UJ_BACKFILL_ROOT", str(tmp_path))
    rows = [Record.objects.create(key=KEY, event=f"row-{n}") for n in range(11)]
    pks = [r.pk for r in rows]  # batch 3: batches of 3, 3, 3, 2
    hold = tmp_path / "hold" / str(pks[6])  # the first row of batch 2
    hold.parent.mkdir()
    hold.touch()

    answer = records_backfill.enqueue()
    first = start_worker("--concurrency", "1", LEASE="2s", ENVIRONMENT="acceptance")
    wait_for(lambda: Path(f"{hold}.reached").exists())
    # Batch 2 is in handle(), before its writes; batches 0 and 1 are checkpointed.
    assert sorted(
        JobStep.objects.filter(job_id=answer.id).values_list("name", flat=True)
    ) == ["batch:0", "batch:1"]
    [running] = BackfillLedger.objects.filter(name=records_backfill.name)
    assert (running.status, running.rows, running.batches) == ("running", 6, 2)
    assert (running.last_cursor, running.job_id) == (pks[5], answer.id)
    first.kill()
    hold.unlink()

    start_worker("--concurrency", "1", LEASE="2s", ENVIRONMENT="acceptance")
    wait_for(
        lambda: Job.objects.get(pk=answer.id).state == "done",
        timeout=deadline(lease=2, work=10),
        message="the pass to finish on the second worker",
    )
    # Exactly once per row: handle() adds 1 to each row it is given.
    assert dict(
        Record.objects.filter(key=KEY).values_list("pk", "attempt")
    ) == dict.fromkeys(pks, 1)
    attempts = dict(
        JobStep.objects.filter(job_id=answer.id).values_list("name", "attempt")
    )
    assert attempts == {"batch:0": 1, "batch:1": 1, "batch:2": 2, "batch:3": 2}
    assert Job.objects.get(pk=answer.id).attempt == 2
    # Which process handled which rows: the second started AT batch 2.
    handled: dict[str, list[int]] = {}
    for line in (tmp_path / "handled.log").read_text().splitlines():
        pid, pk = line.split()
        handled.setdefault(pid, []).append(int(pk))
    assert handled.pop(str(first.pid)) == pks[:6]
    assert list(handled.values()) == [pks[6:]]
    # One ledger row, adopted by the retry: done, started when the pass began.
    [done] = BackfillLedger.objects.filter(name=records_backfill.name)
    assert (done.id, done.status, done.rows, done.batches) == (
        running.id,
        "done",
        11,
        4,
    )
    assert (done.started_at, done.last_cursor, done.error) == (
        running.started_at,
        pks[10],
        "",
    )
    assert done.completed_at is not None
