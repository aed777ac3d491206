"""``manage.py jobs`` (P3): the operator verbs with stable --json output."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tests.testapp.jobs import noop, terminal
from ultimate_jobs.api import reads as introspection
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db


def jobs_json(*args):
    out = io.StringIO()
    call_command("jobs", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_list_pages_newest_first_with_a_cursor_and_filters(jobs):
    answers = noop.enqueue_many([{"key": str(i)} for i in range(5)])
    first = jobs_json("list", "--limit", "2")
    assert [j["id"] for j in first["jobs"]] == [str(answers[4].id), str(answers[3].id)]
    second = jobs_json("list", "--limit", "2", "--after", first["next"])
    assert [j["id"] for j in second["jobs"]] == [str(answers[2].id), str(answers[1].id)]
    last = jobs_json("list", "--limit", "2", "--after", second["next"])
    assert [j["id"] for j in last["jobs"]] == [str(answers[0].id)]
    assert last["next"] is None
    terminal.enqueue(key="t")
    jobs.run()
    dead = jobs_json("list", "--state", "dead")
    assert [(j["name"], j["state"]) for j in dead["jobs"]] == [
        ("testapp.terminal", "dead")
    ]
    assert len(jobs_json("list", "--name", "testapp.noop")["jobs"]) == 5
    prefix = str(answers[0].id)[:13]
    assert str(answers[0].id) in [
        j["id"] for j in jobs_json("list", "--id-prefix", prefix)["jobs"]
    ]


def test_show_retry_cancel_promote_remove(jobs):
    answer = terminal.enqueue(key="t")
    jobs.run()
    shown = jobs_json("show", str(answer.id))
    assert (shown["state"], shown["stop_reason"]) == ("dead", "terminal")
    assert jobs_json("retry", str(answer.id))["state"] == "ready"
    assert jobs_json("cancel", str(answer.id))["state"] == "cancelled"
    delayed = noop.using(delay="1h").enqueue(key="d")
    jobs_json("promote", str(delayed.id))
    assert Job.objects.get(pk=delayed.id).state == "ready"
    jobs_json("remove", str(answer.id))
    assert not Job.objects.filter(pk=answer.id).exists()


def test_errors_carry_their_code(jobs):
    answer = noop.enqueue(key="live")
    out = io.StringIO()
    with pytest.raises(CommandError, match="X_JOB_NOT_REQUEUEABLE"):
        call_command("jobs", "retry", str(answer.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["error"]["code"] == "X_JOB_NOT_REQUEUEABLE"


def test_stats_and_pauses():
    noop.enqueue_many([{"key": str(i)} for i in range(3)])
    noop.using(queue="mail", delay="1h").enqueue(key="m")
    jobs_json("pause", "mail")
    stats = {q["queue"]: q for q in jobs_json("stats")}
    assert stats["default"]["depth"] == 3
    assert stats["default"]["states"]["ready"] == 3
    assert stats["default"]["oldest_ready_seconds"] is not None
    assert stats["mail"]["states"]["delayed"] == 1
    assert stats["mail"]["paused"] is True
    assert jobs_json("resume", "mail")["was_paused"] is True
    assert jobs_json("workers") == []


def test_page_sizes_and_cursors_are_checked():
    with pytest.raises(InvalidArgument) as info:
        introspection.list_jobs(limit=500)
    assert info.value.field == "limit"
    with pytest.raises(InvalidArgument) as info:
        introspection.list_jobs(after="nope")
    assert info.value.field == "after"
    with pytest.raises(InvalidArgument):
        introspection.list_jobs(state="sleeping")
