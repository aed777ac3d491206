"""Bulk operator verbs (P2): bounded to 1,000 rows per call, answering affected and
remaining, so "call until remaining is zero" ends."""

from __future__ import annotations

import pytest

from tests.testapp.jobs import noop, terminal
from ultimate_jobs import api
from ultimate_jobs.api import verbs
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def test_bulk_retry_is_bounded_and_reports_what_remains(jobs, monkeypatch):
    monkeypatch.setattr(verbs, "BULK_LIMIT", 3)
    terminal.enqueue_many([{"key": f"t{i}"} for i in range(5)])
    jobs.run()
    assert api.bulk("retry", state="dead") == {"affected": 3, "remaining": 2}
    assert api.bulk("retry", state="dead") == {"affected": 2, "remaining": 0}
    assert api.bulk("retry", state="dead") == {"affected": 0, "remaining": 0}
    assert Job.objects.filter(state="ready").count() == 5


def test_bulk_retry_skips_rows_whose_key_a_live_job_holds(jobs):
    held = terminal.enqueue(key="held")
    free = terminal.enqueue(key="free")
    jobs.run()
    live = terminal.enqueue(key="held")  # a live job takes the released key again
    assert api.bulk("retry", state="dead") == {"affected": 1, "remaining": 0}
    states = dict(Job.objects.values_list("id", "state"))
    assert (states[held.id], states[free.id], states[live.id]) == (
        "dead",
        "ready",
        "ready",
    )


def test_bulk_retry_takes_the_oldest_of_finished_rows_sharing_a_key(jobs):
    first = terminal.enqueue(key="k")
    jobs.run()
    second = terminal.enqueue(key="k")
    jobs.run()
    assert api.bulk("retry", state="dead") == {"affected": 1, "remaining": 0}
    states = dict(Job.objects.values_list("id", "state"))
    assert (states[first.id], states[second.id]) == ("ready", "dead")


def test_bulk_cancel_promote_remove_with_filters():
    noop.using(queue="mail").enqueue_many([{"key": f"m{i}"} for i in range(3)])
    noop.using(queue="other").enqueue(key="o")
    assert api.bulk("cancel", state="ready", queue="mail") == {
        "affected": 3,
        "remaining": 0,
    }
    assert Job.objects.filter(state="cancelled").count() == 3
    noop.using(delay="1h").enqueue_many([{"key": f"d{i}"} for i in range(2)])
    assert api.bulk("promote", state="delayed") == {"affected": 2, "remaining": 0}
    assert api.bulk("remove", state="cancelled") == {"affected": 3, "remaining": 0}
    assert Job.objects.count() == 3


def test_bulk_refuses_states_a_verb_cannot_take():
    with pytest.raises(InvalidArgument) as info:
        api.bulk("retry", state="ready")
    assert info.value.field == "state"
    with pytest.raises(InvalidArgument):
        api.bulk("remove", state="running")
    with pytest.raises(InvalidArgument):
        api.bulk("explode", state="dead")


def test_the_command_runs_bulk_verbs(jobs):
    import io
    import json

    from django.core.management import call_command

    terminal.enqueue_many([{"key": f"c{i}"} for i in range(2)])
    jobs.run()
    out = io.StringIO()
    call_command("jobs", "bulk", "retry", "--state", "dead", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"affected": 2, "remaining": 0}
