"""Bounds on what callers hand in (B1, B4; issue 14, defects 1-3).

Every refusal is a coded JobsError naming the field and the value, raised before any
statement: nothing is written, and a caller that catches the error inside its own
``transaction.atomic()`` can go on writing and commit. Before these checks each of
these inputs reached PostgreSQL and came back as a retryable ``X_QUERY`` that aborted
the caller's transaction (or a ValueError, a RecursionError, a poison row).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse

from tests.testapp.hardening_jobs import (
    keyed,
    reschedules_past_the_horizon,
    sleeps_past_the_horizon,
    takes_anything,
)
from tests.testapp.jobs import noop, touch
from tests.testapp.models import Record
from ultimate_jobs import (
    InputTooDeep,
    InputTooLarge,
    InstantOutOfRange,
    InvalidArgument,
    InvalidDuration,
    InvalidJobPayload,
    JobDeclarationInvalid,
    JobsError,
    JobTenantRequired,
    recur,
    unrecur,
)
from ultimate_jobs.models import Job, OutboxMessage, Schedule

pytestmark = pytest.mark.django_db


def nested(levels: int) -> object:
    """A value nested ``levels`` lists deep (in an input, the object is one more)."""
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def refused_in_a_transaction(call) -> Any:
    """Run ``call`` inside the caller's transaction, catch its error, write and commit
    around it: the transaction must be intact (B4)."""
    with transaction.atomic():
        Record.objects.create(key="before", event="business")
        with pytest.raises(JobsError) as info:
            call()
        Record.objects.create(key="after", event="business")
    assert sorted(Record.objects.values_list("key", flat=True)) == ["after", "before"]
    Record.objects.all().delete()
    assert Job.objects.count() == 0
    assert OutboxMessage.objects.count() == 0
    return info.value


BAD_INPUTS = [
    pytest.param({"data": "a\x00b"}, "data", "NUL", id="nul"),
    pytest.param({"data": "a\ud800b"}, "data", "surrogate", id="lone-surrogate"),
    pytest.param({"data": {"k\x00": 1}}, "data.k\x00", "NUL", id="nul-in-a-key"),
    pytest.param({"data": [1, 2**70]}, "data[1]", "64 bits", id="int-past-64-bits"),
    pytest.param({"data": 10**5000}, "data", "64 bits", id="int-of-5000-digits"),
]


@pytest.mark.parametrize(("kwargs", "field", "reason"), BAD_INPUTS)
def test_input_postgresql_cannot_hold_is_refused_naming_the_path(kwargs, field, reason):
    """Defect 2: NUL, lone surrogates and huge integers came back as X_QUERY (or a
    ValueError from repr) and aborted the caller's transaction."""
    error = refused_in_a_transaction(lambda: takes_anything.enqueue(key="k", **kwargs))
    assert isinstance(error, InvalidJobPayload)
    assert error.code == "X_INVALID_PAYLOAD"
    assert error.field == field
    assert reason in error.reason
    # Outside a transaction (the direct path) too, and nothing is written.
    with pytest.raises(InvalidJobPayload):
        takes_anything.enqueue(key="k", **kwargs)
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "error_class", "field"),
    [
        pytest.param(
            {"delay": "3650000d"}, InvalidDuration, "delay", id="delay-10000y"
        ),
        pytest.param({"delay": 1e300}, InvalidDuration, "delay", id="delay-1e300"),
        pytest.param(
            {"run_at": datetime(9999, 12, 31, tzinfo=UTC)},
            InstantOutOfRange,
            "run_at",
            id="run_at-9999",
        ),
        pytest.param(
            {"run_at": datetime.now(UTC) + timedelta(days=365 * 101)},
            InstantOutOfRange,
            "run_at",
            id="run_at-101y",
        ),
        pytest.param(
            {"run_at": datetime(1969, 12, 31, tzinfo=UTC)},
            InstantOutOfRange,
            "run_at",
            id="run_at-1969",
        ),
    ],
)
def test_instants_outside_1970_to_100_years_ahead_are_refused(
    options, error_class, field
):
    """Defect 1: a far-future instant was stored, then unreadable by every reader."""
    error = refused_in_a_transaction(lambda: noop.using(**options).enqueue(key="k"))
    assert isinstance(error, error_class)
    assert error.field == field
    with pytest.raises(error_class):
        noop.enqueue_many([{"key": "m"}], **options)
    assert Job.objects.count() == 0


def test_the_edges_of_the_instant_range_are_accepted():
    soon = noop.using(delay="36000d").enqueue(key="98y")  # under 100 years
    edge = noop.using(run_at=datetime(1970, 1, 1, tzinfo=UTC)).enqueue(key="1970")
    assert Job.objects.get(pk=soon.id).state == "delayed"
    assert Job.objects.get(pk=edge.id).state == "ready"


def test_an_actor_longer_than_its_column_or_with_a_nul_is_refused():
    error = refused_in_a_transaction(
        lambda: touch.using(actor="x" * 256).enqueue(key="a", tenant="t")
    )
    assert isinstance(error, InvalidArgument)
    assert (error.code, error.field) == ("X_INVALID_ARGUMENT", "actor")
    assert "at most 255 characters" in error.reason
    error = refused_in_a_transaction(
        lambda: touch.using(actor="ops\x00").enqueue(key="a", tenant="t")
    )
    assert error.field == "actor"
    touch.using(actor="x" * 255).enqueue(key="ok", tenant="t")
    assert Job.objects.get().enqueued_by == "x" * 255


def test_keys_and_tenants_with_a_nul_are_refused():
    error = refused_in_a_transaction(
        lambda: keyed.enqueue(key="k", tenant="t", nul_key=True)
    )
    assert isinstance(error, JobDeclarationInvalid)
    assert error.field == "idempotency_key"
    error = refused_in_a_transaction(
        lambda: keyed.enqueue(key="k", tenant="t", nul_tenant=True)
    )
    assert isinstance(error, JobTenantRequired)
    assert error.field == "tenant"


def test_depth_is_bounded_and_checked_without_recursion(settings):
    """Defect 3: 497 levels raised RecursionError at enqueue, 496 were accepted and
    crashed every attempt. Now 64 levels pass and the 65th is refused, however deep."""
    for depth in (64, 496, 5000):
        error = refused_in_a_transaction(
            lambda depth=depth: takes_anything.enqueue(key="d", data=nested(depth))
        )
        assert isinstance(error, InputTooDeep)
        assert error.code == "X_INPUT_TOO_DEEP"
        assert error.field.startswith("data")
    takes_anything.enqueue(key="64", data=nested(63))  # the input object is level 64
    settings.ULTIMATE_JOBS = {"MAX_INPUT_DEPTH": 8}
    with pytest.raises(InputTooDeep) as info:
        takes_anything.enqueue(key="d8", data=nested(8))
    assert info.value.max_depth == 8
    assert Job.objects.count() == 1


def test_size_is_bounded_by_max_input_bytes(settings):
    """Defect 3: a 100 MB input was accepted. The default bound is 1 MiB."""
    error = refused_in_a_transaction(
        lambda: takes_anything.enqueue(key="big", data="x" * (2 * 1024 * 1024))
    )
    assert isinstance(error, InputTooLarge)
    assert error.code == "X_INPUT_TOO_LARGE"
    assert error.max_bytes == 1024 * 1024
    assert len(str(error)) < 400  # the message names the value, bounded
    takes_anything.enqueue(key="fits", data="x" * 1_000_000)
    settings.ULTIMATE_JOBS = {"MAX_INPUT_BYTES": 1000}
    with pytest.raises(InputTooLarge) as info:
        takes_anything.enqueue(key="small", data="é" * 600)  # 1,200 bytes of UTF-8
    assert info.value.size > 1000
    takes_anything.enqueue(key="under", data="x" * 900)
    assert Job.objects.count() == 2


def test_a_body_s_sleep_or_reschedule_past_the_horizon_fails_with_a_coded_error(jobs):
    sleeps_past_the_horizon.enqueue(key="s")
    reschedules_past_the_horizon.enqueue(key="r")
    attempts = jobs.run()
    assert sorted(a.outcome for a in attempts) == ["dead-lettered", "dead-lettered"]
    codes = dict(Job.objects.values_list("name", "error_code"))
    assert codes == {
        sleeps_past_the_horizon.name: "X_INVALID_DURATION",
        reschedules_past_the_horizon.name: "X_INSTANT_OUT_OF_RANGE",
    }


def test_recur_and_unrecur_refuse_text_postgresql_cannot_hold():
    """Defect 2: recur/unrecur raised DataError."""
    for change in (
        {"schedule_key": "bad\x00key"},
        {"input": {"key": "k\x00"}},
        {"input": {"key": "k", "data": 2**64}},
        {"description": "d\x00"},
        {"tz": "Europe/Paris\x00"},
    ):
        fields: dict[str, Any] = {
            "input": {"key": "k"},
            "cron": "0 9 * * *",
            "tz": "UTC",
            "schedule_key": "nightly",
            **change,
        }
        with transaction.atomic():
            with pytest.raises(JobsError) as info:
                recur(takes_anything, **fields)
            Record.objects.create(key="after", event="x")
        assert info.value.code != "X_QUERY", change
        assert Schedule.objects.count() == 0
    with pytest.raises(InvalidArgument) as info:
        unrecur("bad\x00key")
    assert info.value.field == "schedule_key"


def test_the_admin_add_schedule_form_answers_errors_not_500(admin_client):
    """Defect 2: input PostgreSQL cannot hold made the add form answer 500."""
    url = reverse("admin:ultimate_jobs_schedule_add")
    for data in (
        '{"key": "a\\u0000b"}',
        '{"key": "a\\ud800"}',
        '{"key": "a", "data": 1e400}',
    ):
        page = admin_client.post(
            url,
            {
                "key": "nightly",
                "job": takes_anything.name,
                "input": data,
                "cron": "0 9 * * *",
                "tz": "UTC",
                "catch_up": "skip",
                "max_catch_up": "10",
            },
        )
        assert page.status_code == 200, data
        assert "errorlist" in page.content.decode()
    assert Schedule.objects.count() == 0


def test_list_filters_with_a_nul_are_refused_not_sent():
    from ultimate_jobs import api

    filters: dict[str, Any]
    for field in ("queue", "name", "tenant"):
        filters = {field: "x\x00"}
        with pytest.raises(InvalidArgument) as info:
            api.list_jobs(**filters)
        assert info.value.field == field


def test_the_error_names_the_value_but_never_a_gigantic_one():
    with pytest.raises(InvalidJobPayload) as info:
        takes_anything.enqueue(key="k", data=["x" * 100_000, 10**5000])
    assert len(str(info.value)) < 400
    assert json.dumps(info.value.field) == '"data[1]"'


def test_a_body_s_nul_in_a_step_result_or_a_note_is_refused_not_sent(jobs):
    """B4 inside a body: refused with a coded error before the write, not a retryable
    X_QUERY that would fail every attempt the same way."""
    from tests.testapp.hardening_jobs import writes_a_nul

    step = writes_a_nul.enqueue(key="s", where="step")
    note = writes_a_nul.enqueue(key="p", where="progress")
    assert [a.outcome for a in jobs.run()] == ["dead-lettered", "dead-lettered"]
    for answer, field in ((step, "result of step 'nul' at text"), (note, "note")):
        job = Job.objects.get(pk=answer.id)
        assert job.error_code == "X_INVALID_ARGUMENT"
        assert f"{field}=" in job.last_error


def test_publish_event_and_pause_refuse_text_postgresql_cannot_hold():
    from ultimate_jobs import api, publish_event

    with transaction.atomic():
        with pytest.raises(InvalidArgument) as info:
            publish_event("order.paid", {"note": "a\x00"})
        assert info.value.field == "payload.note"
        with pytest.raises(InvalidArgument):
            publish_event("order\x00paid", {})
        with pytest.raises(InvalidArgument):
            api.pause_queue("default", by="ops\x00")
        Record.objects.create(key="after", event="x")  # the transaction is intact
