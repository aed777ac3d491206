"""Durations (J5), retry curves and verdicts (R1, R2), UUIDv7 ids (H5). No database."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest

from ultimate_jobs import (
    JobDeclarationInvalid,
    Retry,
    RetryAfter,
    Terminal,
    register_error_retry,
    retry_schedule,
)
from ultimate_jobs.declaration.retry import classify
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import (
    InvalidDuration,
    InvalidJobPayload,
    JobAborted,
)
from ultimate_jobs.ground.ids import uuid7, uuid7s


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (5, 5.0),
        (0.25, 0.25),
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("3d", 259200.0),
        ("1w", 604800.0),
        ("1.5s", 1.5),
        (timedelta(minutes=2), 120.0),
    ],
)
def test_durations_accept_numbers_timedeltas_and_unit_strings(value, seconds):
    assert parse_duration(value, field="timeout") == seconds


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        "0s",
        "-5s",
        "5",
        "5 minutes",
        "\u0663s",  # an Arabic-Indic 3: \\d reads it, a duration does not (B4)
        "m",
        "",
        None,
        True,
        float("inf"),
        timedelta(0),
    ],
)
def test_durations_refuse_zero_negative_and_malformed_naming_the_field(value):
    with pytest.raises(InvalidDuration) as info:
        parse_duration(value, field="step_timeout")
    assert info.value.field == "step_timeout"
    assert info.value.code == "X_INVALID_DURATION"
    assert "step_timeout" in str(info.value)


def test_retry_schedule_exponential_doubles_from_the_delay():
    assert retry_schedule(Retry(attempts=5, backoff="exponential", delay="1s")) == [
        1,
        2,
        4,
        8,
    ]


def test_retry_schedule_linear_fixed_and_capped():
    assert retry_schedule(Retry(attempts=4, backoff="linear", delay=2)) == [2, 4, 6]
    assert retry_schedule(Retry(attempts=4, backoff="fixed", delay="3s")) == [3, 3, 3]
    assert retry_schedule(Retry(attempts=6, delay="1m", max_delay="5m")) == [
        60,
        120,
        240,
        300,
        300,
    ]
    assert retry_schedule(Retry(attempts=1)) == []


def test_equal_jitter_stays_between_half_and_the_full_delay():
    retry = Retry(attempts=5, delay=8)
    rng = random.Random(7)
    delays = [retry.next_delay(1, rng) for _ in range(500)]
    assert min(delays) >= 4.0
    assert max(delays) <= 8.0
    assert len({round(d, 6) for d in delays}) > 400  # actually spread
    assert Retry(attempts=5, delay=8, jitter=False).next_delay(1) == 8


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"attempts": 0}, "retry.attempts"),
        ({"attempts": 1.5}, "retry.attempts"),
        ({"backoff": "random"}, "retry.backoff"),
        ({"delay": "0s"}, "retry.delay"),
        ({"max_delay": -1}, "retry.max_delay"),
        ({"jitter": "yes"}, "retry.jitter"),
    ],
)
def test_retry_refuses_bad_fields_at_declaration(kwargs, field):
    with pytest.raises(JobDeclarationInvalid) as info:
        Retry(**kwargs)
    assert info.value.field == field


def test_final_attempt_is_the_last_one_the_policy_allows():
    retry = Retry(attempts=3)
    assert [retry.is_final_attempt(n) for n in (1, 2, 3)] == [False, False, True]


class Unlucky(Exception):
    pass


class VeryUnlucky(Unlucky):
    pass


def test_the_exception_decides_the_verdict():
    assert classify(Terminal("no")) == "terminal"
    assert classify(RetryAfter(12)) == 12.0
    assert classify(RuntimeError("x")) == "retry"
    assert classify(InvalidJobPayload("j", "f", 1, "bad")) == "terminal"
    assert classify(JobAborted("DRAINING")) == "retry"
    register_error_retry(Unlucky, "terminal")
    assert classify(VeryUnlucky()) == "terminal"  # registered on a base class


def test_uuid7_is_version_7_and_strictly_increasing():
    ids = [uuid7() for _ in range(20_000)]
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids[:100])
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_uuid7s_answers_a_batch_that_continues_the_order_of_single_ids():
    before = uuid7()
    batch = uuid7s(10_000)  # more than the 12-bit counter holds in one millisecond
    after = uuid7()
    assert len(set(batch)) == 10_000
    assert [before, *batch, after] == sorted([before, *batch, after])
    assert {(u.version, u.variant) for u in batch} == {(7, uuid.RFC_4122)}


def test_uuid7s_ids_are_ordinary_uuids_stamped_with_the_clock():
    """The ids are built without uuid.UUID's argument checks: they must still be
    whole UUIDs (equal, hashed, pickled and printed like any), and their time part
    is the clock's millisecond, the counter carrying into it only on overflow."""
    import pickle
    import time

    start_ms = time.time_ns() // 1_000_000
    batch = uuid7s(5_000)
    end_ms = time.time_ns() // 1_000_000
    for made in (batch[0], batch[-1]):
        twin = uuid.UUID(str(made))
        assert made == twin and hash(made) == hash(twin) and made.int == twin.int
        assert pickle.loads(pickle.dumps(made)) == made  # noqa: S301 - our own bytes
        assert made.is_safe is uuid.SafeUUID.unknown
    assert start_ms <= batch[0].int >> 80 <= end_ms
    assert batch[-1].int >> 80 <= end_ms + 5_000 // 4096 + 1
