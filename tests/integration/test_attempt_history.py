"""Attempt history (P6, issue 15): every attempt of a job is kept, number, worker,
start, end, outcome and bounded error, written by the statement that settles it, so a
retry or a requeue never erases the past; the latest attempt is the job row itself."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from tests import claiming
from tests.testapp.jobs import flaky, terminal, touch
from ultimate_jobs import api
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Attempt, Job
from ultimate_jobs.runtime.rides import NO_RIDE
from ultimate_jobs.runtime.settle import Settler
from ultimate_jobs.sql import QUERIES

pytestmark = pytest.mark.django_db

DB = DjangoDatabase("default")


def show(job_id):
    out = io.StringIO()
    call_command("jobs", "show", str(job_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def outline(attempts):
    return [
        (a["attempt"], a["outcome"], (a["error"].splitlines() or [""])[0])
        for a in attempts
    ]


def claim(now, worker, lease=5.0):
    return claiming.claim(
        DB,
        queues=["default"],
        limit=10,
        worker_id=worker,
        lease_seconds=lease,
        names=None,
        now=now,
    )


def test_each_retried_attempt_is_kept_with_its_error_oldest_first(jobs):
    answer = flaky.enqueue(key="twice", fail_times=2)
    jobs.run()
    jobs.travel(seconds=11)
    jobs.run()
    jobs.travel(seconds=21)
    jobs.run()
    shown = show(answer.id)
    assert shown["state"] == "done"
    assert outline(shown["attempts"]) == [
        (1, "retried", "builtins.RuntimeError: failing attempt 1 of 2"),
        (2, "retried", "builtins.RuntimeError: failing attempt 2 of 2"),
        (3, "completed", ""),
    ]
    first, second, last = shown["attempts"]
    assert "Traceback (most recent call last)" in first["error"]
    assert {a["worker_id"] for a in shown["attempts"]} == {"testing"}
    assert all(a["run_id"] == str(answer.run_id) for a in shown["attempts"])
    assert first["started_at"] < first["finished_at"] <= second["started_at"]
    assert last["finished_at"] is not None
    assert api.get(answer.id)["attempts"] == shown["attempts"]
    # The latest attempt is the job row itself: two rows stored, not three.
    assert Attempt.objects.filter(job_id=answer.id).count() == 2


def test_retrying_a_dead_job_keeps_the_attempts_of_the_earlier_run(jobs):
    answer = terminal.enqueue(key="dead-then-retried")
    jobs.run()
    assert Job.objects.get(pk=answer.id).state == "dead"
    new_run = api.retry(answer.id)
    jobs.run()
    shown = show(answer.id)
    assert shown["state"] == "dead"
    assert [(a["attempt"], a["outcome"]) for a in shown["attempts"]] == [
        (1, "dead-lettered"),
        (1, "dead-lettered"),
    ]
    assert [a["run_id"] for a in shown["attempts"]] == [
        str(answer.run_id),
        str(new_run),
    ]
    assert all(
        a["error"].startswith("ultimate_jobs.ground.exceptions.Terminal")
        or "this input can never work" in a["error"]
        for a in shown["attempts"]
    )


def test_a_lapsed_attempt_is_recorded_once_before_a_limited_claim_takes_the_row(jobs):
    """P6 with the limited claim (W5): the staging pass keeps the attempt that died,
    the claim that takes the row over counts a new one."""
    answer = touch.enqueue(key="lapsed", tenant="t")
    claim(jobs.now(), "w-dead")
    [second] = claim(jobs.now() + timedelta(seconds=6), "w-2")
    assert Settler(DB).complete(second) is True
    attempts = show(answer.id)["attempts"]
    assert [(a["attempt"], a["outcome"], a["worker_id"]) for a in attempts] == [
        (1, "lapsed", "w-dead"),
        (2, "completed", "w-2"),
    ]
    assert attempts[0]["error"] == "LEASE_LAPSED"


def test_a_lapsed_attempt_is_recorded_by_the_staging_pass_of_a_plain_claim(jobs):
    """P6 with the plain claim (W5): job_stage makes the lapsed row ready again and
    keeps the attempt that died; the next claim does not record it twice."""
    answer = touch.enqueue(key="lapsed-plain", tenant="t")

    def plain(now, worker):
        return DB.run(
            QUERIES["job_claim_plain"],
            queues=["default"],
            limit=10,
            worker_id=worker,
            lease_seconds=5.0,
            now=now,
            names=[touch.name],
        )

    plain(jobs.now(), "w-dead")
    later = jobs.now() + timedelta(seconds=6)
    [staged] = DB.run(
        QUERIES["job_stage"],
        queues=["default"],
        limit=10,
        dropped=[],
        now=later,
        names=[touch.name],
        registry=None,
        registry_lease=5.0,
        **NO_RIDE,
    )
    assert staged["staged"] == 1
    [second] = plain(later, "w-2")
    assert Settler(DB).complete(second) is True
    attempts = show(answer.id)["attempts"]
    assert [(a["attempt"], a["outcome"], a["worker_id"]) for a in attempts] == [
        (1, "lapsed", "w-dead"),
        (2, "completed", "w-2"),
    ]


def test_an_attempt_abandoned_at_the_drain_deadline_is_recorded(jobs):
    answer = touch.enqueue(key="abandoned", tenant="t")
    [first] = claim(jobs.now(), "w-draining")
    assert Settler(DB).release(first, uncount=False) is True
    [(attempt, outcome, worker)] = [
        (a["attempt"], a["outcome"], a["worker_id"])
        for a in show(answer.id)["attempts"]
    ]
    assert (attempt, outcome, worker) == (1, "abandoned", "w-draining")


def test_an_interrupted_attempt_is_not_an_attempt(jobs):
    answer = touch.enqueue(key="interrupted", tenant="t")
    [first] = claim(jobs.now(), "w-draining")
    assert Settler(DB).release(first, uncount=True) is True
    assert show(answer.id)["attempts"] == []


def test_attempts_go_with_the_job(jobs):
    answer = flaky.enqueue(key="removed", fail_times=1)
    jobs.run()
    assert Attempt.objects.filter(job_id=answer.id).count() == 1
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM ultimate_jobs_job WHERE id = %s", [answer.id])
    assert Attempt.objects.filter(job_id=answer.id).count() == 0


def test_a_rescheduled_stage_keeps_its_attempts(jobs):
    """S5 resets the attempt count for the next stage: the history still shows
    every attempt of every stage, in order."""
    from tests.testapp.durable_jobs import recover_cart

    answer = recover_cart.enqueue(key="staged")
    jobs.run()
    jobs.travel(hours=1, seconds=1)
    jobs.run()
    jobs.travel(days=1, seconds=1)
    jobs.run()
    attempts = show(answer.id)["attempts"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "rescheduled"),
        (1, "rescheduled"),
        (1, "completed"),
    ]
