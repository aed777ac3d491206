"""Declaring cron tasks (C1): checked where written, registered beside the jobs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.testapp.jobs import noop, touch
from ultimate_jobs import (
    InvalidCron,
    InvalidTimezone,
    JobNameTaken,
    TaskDeclarationInvalid,
    TaskHandle,
    task,
    task_registry,
)
from ultimate_jobs.scheduling.firing import occurrence_key


@pytest.fixture(autouse=True)
def forget_tasks():
    before = set(task_registry.names())
    yield
    for name in set(task_registry.names()) - before:
        task_registry.unregister(name)


def test_a_task_is_registered_under_its_name_and_answers_its_entries():
    @task(cron="*/5 * * * *", tz="Europe/Paris", name="fleet.poll")
    def poll(occurrence):
        return [(touch, {"key": f"poll:{occurrence:%H:%M}", "tenant": "acme"})]

    assert isinstance(poll, TaskHandle)
    assert task_registry.get("fleet.poll") is poll
    occurrence = datetime(2025, 6, 1, 10, 5, tzinfo=UTC)
    [(handle, kwargs)] = poll.entries(occurrence)
    # The function sees the occurrence in the task's own time zone.
    assert (handle, kwargs) == (touch, {"key": "poll:12:05", "tenant": "acme"})
    assert poll.describe() == {
        "kind": "task",
        "name": "fleet.poll",
        "origin": f"{__name__}.test_a_task_is_registered_under_its_name_and_answers_its_entries.<locals>.poll",
        "cron": "*/5 * * * *",
        "tz": "Europe/Paris",
        "catch_up": "skip",
        "max_catch_up": 10,
        "description": "",
    }
    assert poll.next_run(occurrence) == datetime.fromisoformat(
        "2025-06-01T12:10:00+02:00"
    )


def test_tz_is_required_and_checked_at_declaration():
    with pytest.raises(InvalidTimezone, match="required"):
        task(cron="* * * * *", tz=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTimezone, match="did you mean 'America/Bogota'"):
        task(cron="* * * * *", tz="Bogota")


def test_a_bad_cron_is_refused_at_declaration():
    with pytest.raises(InvalidCron, match="minute: 61 is out of range 0-59"):
        task(cron="61 * * * *", tz="UTC")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"catch_up": "always"}, "catch_up"),
        ({"max_catch_up": 0}, "max_catch_up"),
        ({"max_catch_up": True}, "max_catch_up"),
        ({"name": ""}, "name"),
    ],
)
def test_catch_up_and_name_are_checked(options, field):
    def body(occurrence):
        return []

    with pytest.raises(TaskDeclarationInvalid) as caught:
        task(cron="* * * * *", tz="UTC", **{"name": "t.x", **options})(body)
    assert caught.value.field == field
    assert caught.value.code == "X_TASK_DECLARATION_INVALID"


def test_a_task_is_synchronous_and_takes_the_occurrence():
    async def asynchronous(occurrence):
        return []

    def no_argument():
        return []

    with pytest.raises(TaskDeclarationInvalid, match="synchronous"):
        task(cron="* * * * *", tz="UTC", name="t.async")(asynchronous)  # type: ignore[arg-type]
    with pytest.raises(TaskDeclarationInvalid, match="one argument"):
        task(cron="* * * * *", tz="UTC", name="t.none")(no_argument)  # type: ignore[arg-type]


def test_two_functions_under_one_name_are_refused_and_one_seen_twice_is_one():
    def first(occurrence):
        return []

    def second(occurrence):
        return []

    declare = task(cron="* * * * *", tz="UTC", name="t.same")
    handle = declare(first)
    assert declare(first) is handle
    with pytest.raises(JobNameTaken):
        declare(second)


def test_what_a_task_answers_is_checked_when_it_fires():
    @task(cron="* * * * *", tz="UTC", name="t.answers")
    def bad(occurrence):
        return [(noop, "not a dict")]

    with pytest.raises(TaskDeclarationInvalid, match="each entry is"):
        bad.entries(datetime(2025, 1, 1, tzinfo=UTC))


def test_the_occurrence_goes_into_the_idempotency_key():
    occurrence = datetime.fromisoformat("2025-03-30T03:00:00+02:00")
    assert occurrence_key("digest:1", occurrence) == "digest:1@2025-03-30T01:00Z"
    long = occurrence_key("k" * 600, occurrence)
    assert len(long) == 512
    assert long.endswith("@2025-03-30T01:00Z")
    assert long != occurrence_key("k" * 599 + "j", occurrence)
