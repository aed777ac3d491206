"""Cron expressions and time zones (C1, C2, C5): every problem listed at declaration,
IANA zones only, the documented daylight-saving behaviour, and a bisection whose cost
is bounded by the gap's logarithm."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from ultimate_jobs.ground.exceptions import InvalidCron, InvalidTimezone
from ultimate_jobs.scheduling.cron import CronSchedule, check_timezone, parse_cron

# -- declaration-time checks (C1, B1) -------------------------------------------------


def test_a_minute_of_61_is_refused_with_the_field_and_the_range():
    with pytest.raises(InvalidCron) as caught:
        parse_cron("61 * * * *")
    assert caught.value.code == "X_INVALID_CRON"
    assert str(caught.value) == (
        "X_INVALID_CRON: cron='61 * * * *': minute: 61 is out of range 0-59"
    )


def test_every_problem_is_listed_in_one_error():
    with pytest.raises(InvalidCron) as caught:
        parse_cron("*/0 25 0-40 13,foo 5-1")
    assert caught.value.problems == [
        "minute: step '0' is not a whole number of at least 1",
        "hour: 25 is out of range 0-23",
        "day of month: 0 is out of range 1-31",
        "day of month: 40 is out of range 1-31",
        "month: 13 is out of range 1-12",
        "month: 'foo' is not a number or a name",
        "day of week: range 5-1 is reversed",
    ]


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        (
            "* * * *",
            "expected 5 fields (minute hour day-of-month month day-of-week), got 4",
        ),
        (
            "0 0 * * * 2030",
            "expected 5 fields (minute hour day-of-month month day-of-week), got 6",
        ),
        ("", "expected a string of 5 fields, like '*/5 * * * *'"),
        ("0 0 31 2 *", "day of month and month never meet (no such date)"),
        ("0 0 * * mon#2", "day of week: 'mon#2' is not a number or a name"),
        ("0 0 L * *", "day of month: 'L' is not a number"),
        ("1,,2 * * * *", "minute: empty item in '1,,2'"),
    ],
)
def test_malformed_expressions_name_their_problem(expression, problem):
    with pytest.raises(InvalidCron) as caught:
        parse_cron(expression)
    assert caught.value.problems == [problem]


@pytest.mark.parametrize(
    ("expression", "normal"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("0  9 * *   MON-fri", "0 9 * * MON-fri"),
        ("15,45 8-18/2 1-7 jan,JUL sun", "15,45 8-18/2 1-7 jan,JUL sun"),
        ("0 0 29 2 *", "0 0 29 2 *"),
        ("0 0 * * 7", "0 0 * * 7"),
        ("@daily", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_lists_ranges_steps_names_and_macros_are_accepted(expression, normal):
    assert parse_cron(expression) == normal
    CronSchedule(expression, "UTC").next_after(datetime(2025, 1, 1, tzinfo=UTC))


def test_bogota_is_not_a_time_zone_and_the_error_suggests_the_right_one():
    with pytest.raises(InvalidTimezone) as caught:
        check_timezone("Bogota")
    assert caught.value.code == "X_INVALID_TIMEZONE"
    assert str(caught.value) == (
        "X_INVALID_TIMEZONE: tz='Bogota': not an IANA time zone name; "
        "did you mean 'America/Bogota'?"
    )


@pytest.mark.parametrize("tz", [None, "", "Mars/Olympus", "localtime", 5, "../etc"])
def test_anything_but_an_iana_name_is_refused(tz):
    with pytest.raises(InvalidTimezone):
        check_timezone(tz)


def test_iana_names_are_accepted():
    assert check_timezone("America/Bogota") == ZoneInfo("America/Bogota")
    assert check_timezone("UTC") == ZoneInfo("UTC")


# -- daylight saving (C2): the documented table ---------------------------------------

PARIS, NEW_YORK = "Europe/Paris", "America/New_York"


def day_occurrences(cron, tz, day):
    """The occurrences during one local calendar day, as 'HH:MM+offset' strings."""
    schedule = CronSchedule(cron, tz)
    zone = ZoneInfo(tz)
    start = datetime.fromisoformat(day).replace(tzinfo=zone)
    end = start + timedelta(days=1)
    found = schedule.occurrences(start - timedelta(microseconds=1), end)
    return [
        schedule.local(o).strftime("%H:%M%z") + "=" + o.strftime("%H:%MZ")
        for o in found
        if o < end
    ]


@pytest.mark.parametrize(
    ("tz", "day", "cron", "expected"),
    [
        # Spring forward: 02:00-02:59 does not exist. 03:00 fires once; 02:30 fires
        # once, at the first instant after the gap (03:00).
        (PARIS, "2025-03-30", "0 3 * * *", ["03:00+0200=01:00Z"]),
        (PARIS, "2025-03-30", "30 2 * * *", ["03:00+0200=01:00Z"]),
        (NEW_YORK, "2025-03-09", "0 3 * * *", ["03:00-0400=07:00Z"]),
        (NEW_YORK, "2025-03-09", "30 2 * * *", ["03:00-0400=07:00Z"]),
        # Fall back: Paris repeats 02:00-02:59, New York 01:00-01:59. A repeated time
        # fires on its first pass only; 03:00 exists once in both zones.
        (PARIS, "2025-10-26", "0 3 * * *", ["03:00+0100=02:00Z"]),
        (PARIS, "2025-10-26", "30 2 * * *", ["02:30+0200=00:30Z"]),
        (NEW_YORK, "2025-11-02", "0 3 * * *", ["03:00-0500=08:00Z"]),
        (NEW_YORK, "2025-11-02", "30 2 * * *", ["02:30-0500=07:30Z"]),
        (NEW_YORK, "2025-11-02", "30 1 * * *", ["01:30-0400=05:30Z"]),
        # An ordinary day, for contrast.
        (PARIS, "2025-06-01", "30 2 * * *", ["02:30+0200=00:30Z"]),
    ],
)
def test_fixed_hours_fire_once_on_both_switch_days(tz, day, cron, expected):
    assert day_occurrences(cron, tz, day) == expected


def test_every_hour_crons_follow_elapsed_time_across_both_switches():
    spring = day_occurrences("*/30 * * * *", PARIS, "2025-03-30")
    assert spring[2:6] == [
        "01:00+0100=00:00Z",
        "01:30+0100=00:30Z",
        "03:00+0200=01:00Z",  # 02:00 and 02:30 never happen
        "03:30+0200=01:30Z",
    ]
    assert len(spring) == 46
    autumn = day_occurrences("*/30 * * * *", PARIS, "2025-10-26")
    assert autumn[4:10] == [
        "02:00+0200=00:00Z",
        "02:30+0200=00:30Z",
        "02:00+0100=01:00Z",  # the repeated hour fires again: it is real time
        "02:30+0100=01:30Z",
        "03:00+0100=02:00Z",
        "03:30+0100=02:30Z",
    ]
    assert len(autumn) == 50


def test_from_inside_the_second_pass_a_repeated_time_does_not_fire_again():
    # 02:15 CET on 26 Oct 2025 is the second pass of Paris's repeated hour: a task
    # first seen then (or whose watermark is there) does not fire 02:30 a second time.
    second_pass = datetime(2025, 10, 26, 1, 15, tzinfo=UTC)
    fixed = CronSchedule("30 2 * * *", PARIS)
    assert fixed.local(fixed.next_after(second_pass)).isoformat() == (
        "2025-10-27T02:30:00+01:00"
    )
    elapsed = CronSchedule("*/30 * * * *", PARIS)
    assert elapsed.local(elapsed.next_after(second_pass)).isoformat() == (
        "2025-10-26T02:30:00+01:00"
    )


def brute_force(cron, tz, start, end):
    """Occurrences by scanning every minute, straight from the documented rule."""
    zone = ZoneInfo(tz)
    schedule = CronSchedule(cron, tz)
    minutes = []  # (instant, its wall-clock time) for every minute of the window
    at = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while at <= end:
        minutes.append((at, at.astimezone(zone).replace(tzinfo=None)))
        at += timedelta(minutes=1)

    (minute, hour, dom, month, dow), _ = croniter.expand(schedule.expression)

    def has(field, value):
        return field == ["*"] or value in field

    def matches(wall):  # classic cron: either day field, when both are restricted
        on_dom, on_dow = has(dom, wall.day), has(dow, wall.isoweekday() % 7)
        day = on_dom or on_dow if "*" not in (dom[0], dow[0]) else on_dom and on_dow
        return (
            has(minute, wall.minute)
            and has(hour, wall.hour)
            and day
            and (has(month, wall.month))
        )

    if schedule.follows_elapsed_time:
        return [instant for instant, wall in minutes if matches(wall)]
    first_pass: dict[datetime, datetime] = {}
    for instant, wall in minutes:
        first_pass.setdefault(wall, instant)
    found = set()
    wall, last = minutes[0][1], minutes[-1][1]
    while wall <= last:  # every wall time, the skipped ones included
        if matches(wall):
            # the first pass; a skipped time: the first instant past the gap
            found.add(first_pass.get(wall) or next(i for i, w in minutes if w > wall))
        wall += timedelta(minutes=1)
    return sorted(found)


@pytest.mark.parametrize(
    "cron",
    [
        "0 3 * * *",
        "30 2 * * *",
        "30 1 * * *",
        "15 1-3 * * *",
        "0 2 * * sun",
        "*/30 * * * *",
        "*/7 * * * *",
        "0 * * * *",
        "* * * * *",
    ],
)
@pytest.mark.parametrize(
    ("tz", "day"),
    [
        (PARIS, "2025-03-30"),
        (PARIS, "2025-10-26"),
        (NEW_YORK, "2025-03-09"),
        (NEW_YORK, "2025-11-02"),
        ("Australia/Lord_Howe", "2025-04-06"),  # a half-hour switch
        ("Australia/Lord_Howe", "2025-10-05"),
    ],
)
def test_occurrences_match_a_minute_by_minute_scan_of_the_rule(cron, tz, day):
    zone = ZoneInfo(tz)
    start = datetime.fromisoformat(day).replace(tzinfo=zone).astimezone(UTC)
    start -= timedelta(hours=6)
    end = start + timedelta(hours=36)
    schedule = CronSchedule(cron, tz)
    assert schedule.occurrences(start, end) == brute_force(cron, tz, start, end)


# -- bisection (C5) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gap", "cron"),
    [
        (timedelta(hours=3), "* * * * *"),
        (timedelta(hours=3), "*/5 * * * *"),
        (timedelta(days=365), "* * * * *"),
        (timedelta(days=365), "0 3 * * *"),
    ],
)
def test_the_latest_occurrence_of_a_long_gap_costs_log2_evaluations(gap, cron):
    schedule = CronSchedule(cron, PARIS)
    first = schedule.next_after(datetime(2025, 3, 29, 22, 0, 30, tzinfo=UTC))
    until = first + gap + timedelta(seconds=30)
    # The answer, found the slow way: step back from `until` to an occurrence.
    probe = CronSchedule(cron, PARIS)
    expected = until.replace(second=0)
    while probe.next_after(expected - timedelta(seconds=1)) != expected:
        expected -= timedelta(minutes=1)
    schedule.evaluations = 0
    assert schedule.latest_until(first, until) == expected
    bound = 2 + math.ceil(math.log2(gap / timedelta(minutes=1)))
    assert schedule.evaluations <= bound  # 10 for 3 hours, 22 for a year


def test_latest_until_with_a_single_occurrence_costs_one_evaluation():
    schedule = CronSchedule("0 * * * *", "UTC")
    first = datetime(2025, 6, 1, 10, tzinfo=UTC)
    assert schedule.latest_until(first, first + timedelta(minutes=59)) == first
    assert schedule.evaluations == 1
