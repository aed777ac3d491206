"""Backfills (F1) on real PostgreSQL through the testing runner: keyset batches, one
step per batch, checkpoint and replay, the ledger, force, requires, environments,
count and stalled, the throttle's pause inside the step."""

from __future__ import annotations

import itertools
import logging
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.testapp.models import Record
from ultimate_jobs import (
    BackfillInvalid,
    BackfillStalled,
    CancelToken,
    Retry,
    backfill,
    current_tenant,
    pending_backfills,
    registered_backfills,
)
from ultimate_jobs.backfills import ledger as backfill_ledger
from ultimate_jobs.backfills import sweep as backfills
from ultimate_jobs.backfills.runs import backfill_states
from ultimate_jobs.declaration.run import DRAINING
from ultimate_jobs.models import BackfillLedger, Job, JobStep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]

FAST = 10_000  # batches per second: no pause worth the name


class Handled:
    """A handle() that records the primary keys of every batch it was given."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.fail_on_call = fail_on_call

    def __call__(self, rows, token):
        assert isinstance(token, CancelToken)  # the run's token
        self.batches.append([row.pk for row in rows])
        if len(self.batches) == self.fail_on_call:
            raise RuntimeError("handle failed")

    def calls_per_first_pk(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for batch in self.batches:
            counts[batch[0]] = counts.get(batch[0], 0) + 1
        return counts


def records(tag: str, n: int, event: str = "todo") -> list[Record]:
    return [Record.objects.create(key=tag, event=event, attempt=i) for i in range(n)]


def declare(tag: str, handle=None, **options):
    options.setdefault("batch", 3)
    options.setdefault("rate", FAST)
    options.setdefault("retry", Retry(attempts=3, delay="1s", jitter=False))
    return backfill(
        f"tests.backfill.{uuid.uuid4().hex[:8]}",
        options.pop("source", lambda: Record.objects.filter(key=tag)),
        handle if handle is not None else Handled(),
        **options,
    )


def ledger(name: str) -> list[BackfillLedger]:
    return list(BackfillLedger.objects.filter(name=name).order_by("id"))


def steps(job_id) -> dict[str, object]:
    return dict(JobStep.objects.filter(job_id=job_id).values_list("name", "output"))


def test_a_pass_reads_keyset_batches_one_step_each(jobs):
    """F1: batches in pk order, only the source's rows, one step per batch holding the
    cursor and the count, never the rows; WHERE pk > cursor, never OFFSET."""
    rows = records("paged", 7)
    records("other", 2)
    handle = Handled()
    sweep = declare("paged", handle)
    answer = sweep.enqueue()
    with CaptureQueriesContext(connection) as queries:
        [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    pks = [r.pk for r in rows]
    assert handle.batches == [pks[0:3], pks[3:6], pks[6:7]]
    assert steps(answer.id) == {
        "batch:0": {"cursor": pks[2], "rows": 3, "more": True},
        "batch:1": {"cursor": pks[5], "rows": 6, "more": True},
        "batch:2": {"cursor": pks[6], "rows": 7, "more": False},
    }
    reads = [q["sql"] for q in queries.captured_queries if "testapp_record" in q["sql"]]
    assert len(reads) == 3
    assert all("OFFSET" not in sql and "LIMIT 4" in sql for sql in reads)
    assert f'"testapp_record"."id" > {pks[2]}' in reads[1]
    [row] = ledger(sweep.name)
    assert (row.status, row.rows, row.batches, row.last_cursor) == (
        "done",
        7,
        3,
        pks[6],
    )
    assert (row.job_id, row.forced, row.error) == (answer.id, False, "")
    assert row.started_at is not None and row.completed_at is not None
    [declared] = [b for b in registered_backfills() if b.name == sweep.name]
    assert row.checksum == declared.checksum and len(row.checksum) == 64


def test_an_exact_multiple_makes_no_empty_batch_and_an_empty_source_one(jobs):
    records("even", 6)
    even, empty = Handled(), Handled()
    first = declare("even", even).enqueue()
    second = declare("none", empty).enqueue()
    jobs.run()
    assert [len(b) for b in even.batches] == [3, 3]
    assert sorted(steps(first.id)) == ["batch:0", "batch:1"]
    assert empty.batches == []  # handle() is never called with no rows
    assert steps(second.id) == {"batch:0": {"cursor": None, "rows": 0, "more": False}}
    assert Job.objects.get(pk=second.id).state == "done"


def test_source_is_called_once_per_attempt_and_never_at_declaration(jobs):
    calls = []

    def source():
        calls.append(1)
        return Record.objects.filter(key="lazy")

    records("lazy", 7)
    sweep = declare("lazy", source=source, handle=Handled(fail_on_call=2))
    assert calls == []
    sweep.enqueue()
    [first] = jobs.run()
    assert (first.outcome, len(calls)) == ("retried", 1)
    jobs.travel(seconds=2)
    [second] = jobs.run()
    assert (second.outcome, len(calls)) == ("completed", 2)


def test_a_failed_batch_resumes_at_that_batch_without_handling_earlier_ones(jobs):
    """F1, S1: handle fails on batch 3; the next attempt replays batches 0-2 from
    storage (no read, no handle, no pause) and handles batch 3 again; the retry adopts
    the pass's own ledger row."""
    rows = records("resume", 14)  # batches of 3: 3, 3, 3, 3, 2
    handle = Handled(fail_on_call=4)
    sweep = declare("resume", handle)
    answer = sweep.enqueue()
    [first] = jobs.run()
    assert first.outcome == "retried"
    [failed] = ledger(sweep.name)
    assert (failed.status, failed.rows, failed.batches) == ("failed", 9, 3)
    assert failed.error == "RuntimeError: handle failed"
    jobs.travel(seconds=2)
    [second] = jobs.run()
    assert second.outcome == "completed"
    firsts = [rows[i].pk for i in (0, 3, 6, 9, 12)]
    assert handle.calls_per_first_pk() == {
        firsts[0]: 1,
        firsts[1]: 1,
        firsts[2]: 1,
        firsts[3]: 2,
        firsts[4]: 1,
    }
    attempts = dict(
        JobStep.objects.filter(job_id=answer.id).values_list("name", "attempt")
    )
    assert attempts == {
        "batch:0": 1,
        "batch:1": 1,
        "batch:2": 1,
        "batch:3": 2,
        "batch:4": 2,
    }
    [done] = ledger(sweep.name)  # the same row: a retry adopts it
    assert (done.id, done.status, done.rows, done.batches) == (failed.id, "done", 14, 5)
    assert done.started_at == failed.started_at
    assert done.error == ""


def test_a_completed_pass_is_a_no_op_and_force_writes_a_new_row(jobs, caplog):
    records("again", 4)
    handle = Handled()
    sweep = declare("again", handle)
    sweep.enqueue()
    jobs.run()
    assert len(handle.batches) == 2
    again = sweep.enqueue()
    assert not again.deduped  # the PASS is the no-op, not the enqueue
    with caplog.at_level(logging.INFO, logger="ultimate_jobs.backfills.sweep"):
        [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert len(handle.batches) == 2  # nothing handled
    assert [r.status for r in ledger(sweep.name)] == ["done"]
    assert steps(again.id) == {}
    assert [r.message for r in caplog.records] == ["jobs.backfill.skipped"]

    forced = sweep.enqueue(force=True)
    jobs.run()
    assert len(handle.batches) == 4
    first, second = ledger(sweep.name)
    assert (second.status, second.forced, second.job_id) == ("done", True, forced.id)
    assert (first.status, first.forced) == ("done", False)


def test_a_changed_checksum_is_reported_and_never_reruns(jobs, caplog):
    """F1: the checksum hashes source text, which moves without behaviour changing:
    a completed pass stays completed; the change is logged and shown."""
    records("moved", 2)
    handle = Handled()
    sweep = declare("moved", handle)
    sweep.enqueue()
    jobs.run()
    BackfillLedger.objects.filter(name=sweep.name).update(checksum="0" * 64)
    [state] = backfill_states([sweep.name])
    assert (state.state, state.checksum_changed) == ("done", True)
    sweep.enqueue()
    with caplog.at_level(logging.WARNING, logger="ultimate_jobs.backfills.sweep"):
        jobs.run()
    assert len(handle.batches) == 1
    [warning] = caplog.records
    assert warning.message == "jobs.backfill.checksum_changed"
    assert warning.completed_checksum == "0" * 64


def test_the_checksum_follows_what_is_swept_not_the_pacing():
    body = backfills.Backfill
    source, handle = (lambda: Record.objects.all()), Handled()
    common: dict[str, Any] = {"source": source, "handle": handle, "count": None}
    base = body("x", batch=10, rate=1, requires=None, environments=None, **common)
    paced = body("x", batch=99, rate=50, requires=None, environments=None, **common)
    gated = body("x", batch=10, rate=1, requires="a.0001", environments=None, **common)
    placed = body("x", batch=10, rate=1, requires=None, environments=("s",), **common)
    assert base.checksum == paced.checksum
    assert len({base.checksum, gated.checksum, placed.checksum}) == 3


def test_a_required_migration_must_be_applied(jobs):
    records("requires", 2)
    applied, missing = Handled(), Handled()
    ok = declare("requires", applied, requires="testapp.0001_initial")
    waits = declare("requires", missing, requires="testapp.0099_not_yet")
    ok.enqueue()
    blocked = waits.enqueue()
    jobs.run()
    assert len(applied.batches) == 1
    assert missing.batches == []
    job = Job.objects.get(pk=blocked.id)
    assert (job.state, job.error_code) == ("delayed", "X_BACKFILL_MIGRATION_PENDING")
    assert "requires='testapp.0099_not_yet'" in job.last_error
    assert ledger(waits.name) == []  # refused before the ledger is read


def test_environments_limit_where_a_pass_runs(jobs, settings):
    records("where", 2)
    handle = Handled()
    sweep = declare("where", handle, environments=["staging", "qa"])
    refused = sweep.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"  # terminal: a retry cannot move it
    job = Job.objects.get(pk=refused.id)
    assert job.error_code == "X_BACKFILL_ENVIRONMENT"
    assert "ENVIRONMENT='production'" in job.last_error
    assert handle.batches == []
    [state] = backfill_states([sweep.name])
    assert state.state == "excluded"
    assert sweep.name not in [s.name for s in pending_backfills()]

    settings.ULTIMATE_JOBS = {"ENVIRONMENT": "qa"}
    assert backfill_states([sweep.name])[0].state == "pending"
    sweep.enqueue()
    [attempt] = jobs.run()
    assert (attempt.outcome, len(handle.batches)) == ("completed", 1)


def test_count_makes_a_pass_that_does_not_converge_fail_as_stalled(jobs):
    """F1: the source ran dry while count() still answers rows: BackfillStalled,
    terminal, and the ledger row says failed."""
    records("stall", 5)

    def todo():
        return Record.objects.filter(key="stall", event="todo")

    converges = declare(
        "stall",
        lambda rows, token: Record.objects.filter(pk__in=[r.pk for r in rows]).update(
            event="swept"
        ),
        source=todo,
        count=lambda: todo().count(),
    )
    stalls = declare("stall", Handled(), source=todo, count=lambda: todo().count())
    stalled = stalls.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert isinstance(attempt.error, BackfillStalled)
    assert (attempt.error.remaining, attempt.error.rows) == (5, 5)
    job = Job.objects.get(pk=stalled.id)
    assert (job.error_code, job.attempt) == ("X_BACKFILL_STALLED", 1)
    [row] = ledger(stalls.name)
    assert (row.status, row.rows) == ("failed", 5)
    assert row.error.startswith("BackfillStalled: X_BACKFILL_STALLED")

    converges.enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert [r.status for r in ledger(converges.name)] == ["done"]
    assert todo().count() == 0


@pytest.mark.parametrize("answer", [-1, "3", True, None])
def test_a_count_that_is_not_a_count_is_refused(jobs, answer):
    declare("none", count=lambda: answer).enqueue()
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    assert isinstance(attempt.error, BackfillInvalid)
    assert attempt.error.code == "X_BACKFILL_INVALID"
    assert "count()" in str(attempt.error)


def test_a_source_that_is_not_a_pageable_queryset_is_refused(jobs):
    for source in (
        lambda: [1, 2],
        lambda: Record.objects.all()[:5],
        lambda: Record.objects.values("id"),
    ):
        records("bad", 1)
        declare("bad", source=source).enqueue()
    errors = [str(a.error) for a in jobs.run()]
    assert len(errors) == 3
    assert all("X_BACKFILL_INVALID" in e for e in errors)
    assert "source() answers a QuerySet" in errors[0]
    assert "filter the QuerySet, do not slice it" in errors[1]
    assert "not values()" in errors[2]


def test_the_pause_is_spent_inside_the_step_after_handle(jobs, monkeypatch):
    """F1: rate=2 is one batch every 0.5 s; a batch that took 0.1 s pauses 0.4 s, inside
    its step (handle has run, the checkpoint is not yet written); none after the last
    batch, and a replayed batch re-pays none."""
    rows = records("paced", 8)  # batches of 3: 3, 3, 2
    ticks = itertools.count(step=0.1)  # each reading of the clock is 0.1 s later
    monkeypatch.setattr(backfills, "monotonic", lambda: next(ticks))
    handle = Handled(fail_on_call=3)
    sweep = declare("paced", handle, rate=2)
    answer = sweep.enqueue()
    pauses = []

    def pause(token, seconds):
        recorded = sorted(
            JobStep.objects.filter(job_id=answer.id).values_list("name", flat=True)
        )
        pauses.append((round(seconds, 9), len(handle.batches), recorded))

    monkeypatch.setattr(backfills, "wait_between_batches", pause)
    jobs.run()
    assert pauses == [(0.4, 1, []), (0.4, 2, ["batch:0"])]
    jobs.travel(seconds=2)
    jobs.run()  # batches 0 and 1 replay; batch 2 is the last: no pause at all
    assert len(pauses) == 2
    assert [len(b) for b in handle.batches] == [3, 3, 2, 2]
    assert rows  # every row was read


def test_a_cancelled_run_ends_the_pause_at_once():
    from ultimate_jobs.declaration.run import CancelToken

    token = CancelToken()
    token.cancel("DRAINING")
    backfills.wait_between_batches(token, 3600)  # returns: the token is set


def test_registered_and_pending_backfills(jobs):
    records("listed", 2)
    done, waiting = declare("listed"), declare("listed")
    done.enqueue()
    jobs.run()
    names = [b.name for b in registered_backfills()]
    assert {done.name, waiting.name} <= set(names)
    assert names == sorted(names)
    described = next(b for b in registered_backfills() if b.name == done.name)
    assert described.describe() == {
        "name": done.name,
        "checksum": described.checksum,
        "batch": 3,
        "rate": float(FAST),
        "requires": None,
        "environments": None,
        "counts": False,
        "queue": "default",
    }
    by_name = {s.name: s for s in backfill_states()}
    assert by_name[done.name].state == "done"
    assert by_name[waiting.name].state == "pending"
    assert by_name["testapp.records_backfill"].state == "excluded"
    pending = [s.name for s in pending_backfills()]
    assert waiting.name in pending and done.name not in pending


def test_the_ledger_projection_reports_an_orphaned_pass_as_failed(jobs):
    """A worker killed on its final attempt writes nothing: a running row whose job is
    dead reads as failed, so --pending sees it."""
    sweep = declare("orphan")
    answer = sweep.enqueue()
    backfill_ledger.PassLedger(
        name=sweep.name, job_id=answer.id, now=lambda: None
    ).start(checksum="c", forced=False)
    [row] = backfill_ledger.read(names=[sweep.name])
    assert row.status == "running"
    Job.objects.filter(pk=answer.id).update(state="dead")
    [row] = backfill_ledger.read(names=[sweep.name])
    assert (row.status, row.job_state) == ("failed", "dead")
    assert backfill_states([sweep.name])[0].state == "failed"
    assert sweep.name in [s.name for s in pending_backfills()]


def test_the_admin_lists_the_ledger_read_only(jobs, admin_client):
    records("admin", 2)
    sweep = declare("admin")
    sweep.enqueue()
    jobs.run()
    [row] = ledger(sweep.name)
    page = admin_client.get(reverse("admin:ultimate_jobs_backfillledger_changelist"))
    assert page.status_code == 200
    assert sweep.name in page.content.decode()
    url = reverse("admin:ultimate_jobs_backfillledger_change", args=[row.pk])
    detail = admin_client.get(url)
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()  # nothing to save
    add = reverse("admin:ultimate_jobs_backfillledger_add")
    assert admin_client.get(add).status_code == 403


def test_a_tenant_function_scopes_the_pass(jobs):
    records("tenant", 1)
    seen = []
    sweep = declare(
        "tenant",
        lambda rows, token: seen.append(current_tenant()),
        tenant=lambda p: "org-7",
    )
    answer = sweep.enqueue()
    jobs.run()
    assert Job.objects.get(pk=answer.id).tenant_id == "org-7"
    assert seen == ["org-7"]


def test_a_drained_pass_stays_running_in_the_ledger_and_resumes(jobs):
    """W6: a drain interrupts the attempt (not counted); the pass is not failed, and
    the next attempt resumes at the batch the drain stopped."""
    records("drain", 5)
    calls = []

    def handle(rows, token):
        calls.append(rows[0].pk)
        if len(calls) == 2:
            token.cancel(DRAINING)
            token.raise_if_cancelled()

    sweep = declare("drain", handle)
    answer = sweep.enqueue()
    [first] = jobs.run(max_jobs=1)  # back to ready: the next run would take it
    assert first.outcome == "interrupted"
    [row] = ledger(sweep.name)
    assert (row.status, row.rows, row.error) == ("running", 3, "")
    [second] = jobs.run()
    assert second.outcome == "completed"
    assert len(calls) == 3  # batch 1 again, batch 0 replayed from its step
    assert Job.objects.get(pk=answer.id).attempt == 1  # the drain spent none
    assert ledger(sweep.name)[0].status == "done"
