"""Cron expressions in a time zone: checked where written, evaluated DST-correctly.

``parse_cron`` checks a 5-field expression (lists, ranges, steps, month and day names,
the ``@daily``-style macros) and lists EVERY problem in one ``InvalidCron`` (C1).
``check_timezone`` accepts IANA names only (``InvalidTimezone``). ``CronSchedule``
answers occurrences as instants (aware UTC datetimes); it is the only place that turns
wall-clock times into instants, so the daylight-saving rule lives here (C2):

* a cron whose hour field is ``*`` (every hour) follows elapsed time: minutes the clock
  skips in spring do not happen, and the hour the clock repeats in autumn fires twice,
  once per pass;
* a cron with fixed hours fires once per wall-clock time: a time the clock skips fires
  at the first instant after the gap (``30 2 * * *`` fires at 03:00 when 02:00-03:00 is
  skipped), and a time the clock repeats fires on its first pass only.

This is cronie's (and Vixie cron's) rule; docs/scheduling.md has the table for
Europe/Paris and America/New_York. Every call of ``next_after`` is one cron evaluation
and is counted in ``evaluations``: the catch-up of ``skip`` is bounded by it (C5).

croniter is the engine that matches an expression: it answers the next matching
wall-clock time (``_search``), and ``parse_cron`` asks it whether a checked expression
names any date at all. What is written here is what the SPEC needs and croniter lacks:

* ``parse_cron`` (C1: every problem listed, naming the field). croniter stops at the
  first problem and names no field (``[61 25 * * *] is not acceptable, out of range``),
  and accepts more than C1's 5 standard fields: a seconds field (``* * * * * *``),
  ``L``, ``#`` and ``?``, and a reversed range (``5-1``) read as a wrap-around.
* Wall-clock times to instants (C2: ``_instants``, ``_in_first_pass`` and the turn of
  the clock in ``next_after``). croniter is given naive wall-clock times only, because
  its own handling of aware datetimes does not follow C2 and changes between versions.
  Handing croniter aware datetimes instead fails the minute-by-minute comparisons of
  tests/unit/test_cron.py on every version tried: croniter 7.0 fires a repeated time
  twice for fixed hours (``30 2 * * *`` at 02:30+02:00 and again at 02:30+01:00 in
  Paris) and skips the repeated half hour of Lord Howe's autumn switch for
  ``*/7 * * * *``; 6.2 fires ``0 * * * *`` at 02:30 when Lord Howe's clock jumps from
  02:00 to 02:30; 2.0, 5.0 and 6.0 fire ``0 3 * * *`` at 04:00 on New York's autumn
  switch. This module passes them with croniter 2.0, 6.0, 6.2 and 7.0.
* ``latest_until`` (C5: the latest missed occurrence by bisection, not a walk).
  croniter's ``get_prev`` would need the wall-clock mapping above mirrored for walking
  backwards; bisecting over ``next_after`` keeps it in one place.

croniter (with dateutil, 0.5 MiB) is imported by the first evaluation, not with this
module (N2's RSS): every process declares the app's hourly purge task, and only the
scheduler's leader evaluates a cron. ``parse_cron`` asks croniter only when the
day-of-month field names no day before the 29th (a day some month may lack); a field
naming one of the first 28 days meets every month, so croniter of any version finds
a date for it.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ultimate_jobs.ground.exceptions import InvalidCron, InvalidTimezone

if TYPE_CHECKING:
    from croniter import croniter

MINUTE = timedelta(minutes=1)
MONTHS = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# (name, lowest, highest, names whose index + offset is the value)
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...], int], ...] = (
    ("minute", 0, 59, (), 0),
    ("hour", 0, 23, (), 0),
    ("day of month", 1, 31, (), 0),
    ("month", 1, 12, MONTHS, 1),
    ("day of week", 0, 7, DAYS, 0),
)
_NUMBER = re.compile(
    r"^[0-9]+$"
)  # ASCII digits only: int() also reads Arabic-Indic ones
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def _value(text: str, field: tuple[str, int, int, tuple[str, ...], int]) -> str | int:
    """A field value as a number, or a problem (a string)."""
    name, low, high, names, offset = field
    if _NUMBER.match(text):
        number = int(text)
        if not low <= number <= high:
            return f"{name}: {number} is out of range {low}-{high}"
        return number
    if text.lower() in names:
        return names.index(text.lower()) + offset
    kind = "a number or a name" if names else "a number"
    return f"{name}: {text!r} is not {kind}"


def _field_problems(
    text: str, field: tuple[str, int, int, tuple[str, ...], int]
) -> list[str]:
    name = field[0]
    problems: list[str] = []
    for item in text.split(","):
        if not item:
            problems.append(f"{name}: empty item in {text!r}")
            continue
        base, slash, step = item.partition("/")
        if slash and (not _NUMBER.match(step) or int(step) < 1):
            problems.append(
                f"{name}: step {step!r} is not a whole number of at least 1"
            )
        if base == "*":
            continue
        low, dash, high = base.partition("-")
        values = [_value(low, field)] + ([_value(high, field)] if dash else [])
        problems.extend(v for v in values if isinstance(v, str))
        numbers = [v for v in values if isinstance(v, int)]
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            problems.append(f"{name}: range {base} is reversed")
    return problems


def parse_cron(expression: object) -> str:
    """Answer the 5-field form of ``expression``; raise InvalidCron listing every problem."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidCron(
            repr(expression),
            ["expected a string of 5 fields, like '*/5 * * * *'"],
        )
    text = " ".join(expression.split())
    text = MACROS.get(text.lower(), text)
    fields = text.split(" ")
    if len(fields) != 5:
        raise InvalidCron(
            expression,
            [
                f"expected 5 fields (minute hour day-of-month month day-of-week), "
                f"got {len(fields)}"
            ],
        )
    problems = [
        p
        for part, f in zip(fields, _FIELDS, strict=True)
        for p in _field_problems(part, f)
    ]
    if not problems and _first_day(fields[2]) > 28:
        # 5 good fields can still name no date at all: "0 0 31 2 *"
        from croniter import CroniterBadDateError, croniter

        try:
            croniter(text, datetime(2000, 1, 1)).get_next(datetime)
        except CroniterBadDateError:
            problems.append("day of month and month never meet (no such date)")
    if problems:
        raise InvalidCron(expression, problems)
    return text


def _first_day(field: str) -> int:
    """The smallest day a checked day-of-month field names (``*`` and ``*/n``: 1)."""
    return min(
        1 if item.startswith("*") else int(item.partition("/")[0].partition("-")[0])
        for item in field.split(",")
    )


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def check_timezone(tz: object) -> zoneinfo.ZoneInfo:
    """Answer the ZoneInfo of an IANA name; raise InvalidTimezone for anything else."""
    if not isinstance(tz, str) or not tz:
        raise InvalidTimezone(tz, "required: an IANA time zone name like 'UTC'")
    try:
        if tz in _NOT_ZONES:
            raise ValueError(tz)
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    wanted = tz.lower()
    close = sorted(
        n
        for n in _zone_names() - _NOT_ZONES
        if wanted in (n.lower(), n.rsplit("/", 1)[-1].lower())
    )
    if close:
        raise InvalidTimezone(
            tz, f"not an IANA time zone name; did you mean {close[0]!r}?"
        )
    raise InvalidTimezone(tz)


def _first_true(
    low: datetime, high: datetime, test: Callable[[datetime], bool]
) -> datetime:
    """The first whole minute in (low, high] where ``test`` turns true (it stays true)."""
    while high - low > MINUTE:
        middle = low + ((high - low) // 2 // MINUTE) * MINUTE
        if test(middle):
            high = middle
        else:
            low = middle
    return high


class CronSchedule:
    """One cron expression in one time zone: its occurrences, as UTC instants."""

    def __init__(self, expression: str, tz: str) -> None:
        self.expression = parse_cron(expression)
        self.zone = check_timezone(tz)
        self.tz = tz
        self.evaluations = 0  # calls of next_after: each one is a cron evaluation

    @functools.cached_property
    def follows_elapsed_time(self) -> bool:
        """Every hour listed: elapsed time. Fixed hours: once per wall-clock time."""
        from croniter import croniter

        hours = croniter.expand(self.expression)[0][1]
        return hours == ["*"] or len(hours) == 24

    @functools.cached_property
    def _matcher(self) -> croniter:
        from croniter import croniter

        return croniter(self.expression, datetime(2000, 1, 1))

    @property
    def spec(self) -> str:
        """What the watermark was taken under: a change of either restarts it."""
        return f"{self.expression} {self.tz}"

    def local(self, instant: datetime) -> datetime:
        """The instant in this schedule's time zone."""
        return instant.astimezone(self.zone)

    def next_after(self, instant: datetime) -> datetime:
        """The first occurrence strictly after ``instant`` (an aware datetime)."""
        self.evaluations += 1
        instant = instant.astimezone(UTC)
        start = instant.replace(second=0, microsecond=0) + MINUTE
        found = self._search(instant, self._wall(start))
        if self.follows_elapsed_time and self._in_first_pass(start):
            # The wall clock is about to go back: its repeated times come again, and
            # the second pass may hold an occurrence before the first pass's next one.
            offset = self.local(start).utcoffset()
            turn = _first_true(
                start,
                start + timedelta(hours=3),
                lambda m: self.local(m).utcoffset() != offset,
            )
            found = min(found, self._search(instant, self._wall(turn)))
        return found

    def occurrences(self, after: datetime, until: datetime) -> list[datetime]:
        """Every occurrence in (after, until], in order (a walk: for tests and docs)."""
        out: list[datetime] = []
        current = self.next_after(after)
        while current <= until:
            out.append(current)
            current = self.next_after(current)
        return out

    def latest_until(self, first: datetime, until: datetime) -> datetime:
        """The last occurrence at or before ``until``, given ``first``, an occurrence at
        or before it. Bisection over the gap: about log2(gap in minutes) + 2
        evaluations, however many occurrences the gap holds (C5)."""
        if self.next_after(first) > until:
            return first
        # An occurrence lies in (low, until]; none lies in (high, until].
        low, high = first, until
        while high - low > MINUTE:
            middle = low + (high - low) / 2
            if self.next_after(middle) <= until:
                low = middle
            else:
                high = middle
        # (low, high] spans at most a minute: it holds exactly one whole minute.
        return self.next_after(low)

    # -- wall clock to instants ------------------------------------------------------

    def _wall(self, instant: datetime) -> datetime:
        return self.local(instant).replace(tzinfo=None)

    def _in_first_pass(self, instant: datetime) -> bool:
        local = self.local(instant)
        return local.fold == 0 and (
            local.replace(fold=1).utcoffset() != local.utcoffset()
        )

    def _search(self, after: datetime, wall: datetime) -> datetime:
        """The first occurrence after ``after`` among wall times from ``wall`` on."""
        for _ in range(10_000):
            self._matcher.set_current(wall - timedelta(seconds=1), force=True)
            match: datetime = self._matcher.get_next(datetime)
            for candidate in self._instants(match):
                if candidate > after:
                    return candidate
            wall = match + MINUTE
        raise InvalidCron(self.expression, ["no occurrence found"])  # pragma: no cover

    def _instants(self, wall: datetime) -> list[datetime]:
        """The instants a matching wall-clock time stands for, earliest first."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        if first == second:
            return [first]
        if self._wall(first) == wall:  # repeated: fold 0 is the first pass
            return [first, second] if self.follows_elapsed_time else [first]
        if self.follows_elapsed_time:  # skipped: elapsed time has no such minute
            return []
        # Skipped, fixed hours: the first instant whose wall time is past the gap.
        low, high = min(first, second), max(first, second)
        return [_first_true(low, high, lambda m: self._wall(m) > wall)]
