"""Retention of finished jobs (F6): which rows of each job the purge keeps.

A job declares, per final state, ``{"days": n}`` (rows finished within the last n
days), ``{"last": n}`` (the newest n rows), both (a row goes when it breaks either), or
``False`` (no row is kept: it goes at the next pass, whatever its age). A state the job
leaves out takes the project default: ``DEFAULT_RETENTION`` overridden per state by the
``RETENTION`` setting. A declared rule replaces the default of its state whole: ``{"done":
{"last": 7}}`` keeps the newest seven whatever their age.

Rows of a name no job declares (a renamed or deleted job) keep the defaults: the purge
never deletes finished jobs only because the code that wrote them is gone (see
docs/retention.md).

``JobRetention`` is the purge target: per pass it lists the names that have rows (a
loose index scan), applies every ``days`` rule in one bounded statement (the rules as
arrays) and each ``last`` rule per (name, state), in batches. In the partitioned
archive of finished jobs (Q2) it first drops the whole days no rule keeps a row of
(``drop_horizon``), then applies the same rules row by row to the days left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

from ultimate_jobs.conf import JobsSettings, get_settings
from ultimate_jobs.db import Database, DjangoDatabase
from ultimate_jobs.declaration.registry import Registry, registry
from ultimate_jobs.declaration.retention import RETENTION_STATES
from ultimate_jobs.retention.purge import LEFT_BOUND, delete_in_batches
from ultimate_jobs.sql import QUERIES

DAY = 86400.0
DEFAULT_RETENTION: Mapping[str, Any] = {
    "done": {"days": 1},
    "cancelled": {"days": 7},
    "failed": {"days": 30},
    "dead": {"days": 30},
}


@dataclass(frozen=True, slots=True)
class Rule:
    """How many finished rows of one job in one state are kept."""

    days: float | None = None  # rows finished within this many days; 0 keeps none
    last: int | None = None  # the newest this many rows

    @classmethod
    def parse(cls, value: object) -> Rule:
        """A checked rule: ``False``, or a mapping with ``days`` and/or ``last``."""
        if value is False:
            return cls(days=0.0)
        if not isinstance(value, Mapping):
            raise TypeError(f"a retention rule is a mapping or False, not {value!r}")
        days = value.get("days")
        return cls(days=None if days is None else float(days), last=value.get("last"))

    def describe(self) -> dict[str, float | int] | bool:
        """The rule as it is declared: ``False``, or ``{"days": .., "last": ..}``."""
        if self.days == 0 and self.last is None:
            return False
        out: dict[str, float | int] = {}
        if self.days is not None:
            out["days"] = self.days
        if self.last is not None:
            out["last"] = self.last
        return out


def default_rules(settings: JobsSettings | None = None) -> dict[str, Rule]:
    """The rules of a job that declares none: the defaults, then ``RETENTION``."""
    overrides = (settings or get_settings()).RETENTION
    merged = {**DEFAULT_RETENTION, **overrides}
    return {state: Rule.parse(merged[state]) for state in RETENTION_STATES}


def rules_for(
    name: str,
    *,
    jobs: Registry = registry,
    defaults: Mapping[str, Rule] | None = None,
) -> dict[str, Rule]:
    """The effective rule per final state of the job ``name`` (declared or not)."""
    rules = dict(defaults if defaults is not None else default_rules())
    if name in jobs:
        for state, value in jobs.get(name).definition.retention.items():
            rules[state] = Rule.parse(value)
    return rules


def effective_retention(name: str, *, jobs: Registry = registry) -> dict[str, Any]:
    """The retention the purge applies to ``name``, defaults filled in::

    {"done": {"days": 1.0}, "failed": {"days": 30.0}, "dead": {"days": 30.0},
     "cancelled": {"days": 7.0}}
    """
    return {
        state: rule.describe() for state, rule in rules_for(name, jobs=jobs).items()
    }


@dataclass
class Plan:
    """The statements one pass runs: every days rule at once, each last rule alone."""

    names: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    keep_seconds: list[float] = field(default_factory=list)
    last: list[tuple[str, str, int]] = field(default_factory=list)


def plan(
    names: Iterable[str],
    *,
    jobs: Registry = registry,
    defaults: Mapping[str, Rule] | None = None,
) -> Plan:
    """The rules of every job ``name`` that has rows, as statement parameters."""
    defaults = defaults if defaults is not None else default_rules()
    out = Plan()
    for name in names:
        for state, rule in rules_for(name, jobs=jobs, defaults=defaults).items():
            if rule.days is not None:
                out.names.append(name)
                out.states.append(state)
                out.keep_seconds.append(rule.days * DAY)
            if rule.last is not None:
                out.last.append((name, state, rule.last))
    return out


class JobRetention:
    """The purge target that trims finished jobs per their retention (F6).

    Deleting a job deletes its steps (ON DELETE CASCADE) and the lease rows that
    still name it, in the same statement.
    """

    name = "jobs"

    def __init__(
        self,
        db: Database | None = None,
        *,
        jobs: Registry = registry,
        settings: JobsSettings | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.db = db or DjangoDatabase(self.settings.DATABASE)
        self.jobs = jobs

    def plan(self) -> Plan:
        names = [row["name"] for row in self.db.run(QUERIES["job_purge_names"])]
        return plan(names, jobs=self.jobs, defaults=default_rules(self.settings))

    def purge_expired(self, now: datetime) -> int:
        rules = self.plan()
        batches: list[Callable[[int], int]] = []
        if rules.names:
            batches.append(partial(self._aged, "job_purge_aged", rules, now))
        batches.extend(
            partial(self._beyond, "job_purge_beyond_last", *last) for last in rules.last
        )
        # Q2: the archive, whole days first (no rule keeps any of their rows), then the
        # rows of the days left that a shorter rule no longer keeps.
        moved = self.archive_plan()
        dropped = self.drop_days(moved, now)
        if moved.names:
            batches.append(partial(self._aged, "archive_purge_aged", moved, now))
        batches.extend(
            partial(self._beyond, "archive_purge_beyond_last", *last)
            for last in moved.last
        )
        return dropped + delete_in_batches(
            self.name,
            batches,
            left=partial(self._left, rules, now),
            batch=self.settings.PURGE_BATCH,
            max_batches=self.settings.PURGE_MAX_BATCHES,
        )

    def archive_plan(self) -> Plan:
        names = [row["name"] for row in self.db.run(QUERIES["archive_purge_names"])]
        return plan(names, jobs=self.jobs, defaults=default_rules(self.settings))

    def drop_horizon(self, moved: Plan, now: datetime) -> date:
        """The first UTC day of the archive any rule may still keep a row of: the days
        before it are dropped whole (Q2).

        It is the day of ``now`` less the longest ``days`` rule of any job (declared,
        or with rows in the archive) and of the defaults, and no later than the day of the
        oldest row a ``last``-only rule keeps (those rows have no age limit)."""
        defaults = default_rules(self.settings)
        rules = list(defaults.values())
        for name in {*self.jobs.names(), *moved.names}:
            rules.extend(rules_for(name, jobs=self.jobs, defaults=defaults).values())
        longest = max(
            (rule.days for rule in rules if rule.days is not None), default=0.0
        )
        horizon = (now - timedelta(seconds=longest * DAY)).astimezone(UTC).date()
        pinned = [
            (name, state, last)
            for name, state, last in moved.last
            if rules_for(name, jobs=self.jobs, defaults=defaults)[state].days is None
        ]
        if pinned:
            [row] = self.db.run(
                QUERIES["archive_pinned_since"],
                names=[name for name, _, _ in pinned],
                states=[state for _, state, _ in pinned],
                lasts=[last for _, _, last in pinned],
            )
            if row["since"] is not None:
                horizon = min(horizon, row["since"].astimezone(UTC).date())
        return horizon

    def drop_days(self, moved: Plan, now: datetime) -> int:
        """Drop the days of the archive before ``drop_horizon``; answers the rows they held."""
        [row] = self.db.run(
            QUERIES["archive_drop_before"], day=self.drop_horizon(moved, now)
        )
        return int(row["dropped"])

    def _aged(self, query: str, rules: Plan, now: datetime, batch: int) -> int:
        """One batch of the rows ``rules`` no longer keep, by ``query`` (the hot
        table's job_purge_aged or archive_purge_aged, Q2)."""
        [row] = self.db.run(
            QUERIES[query],
            names=rules.names,
            states=rules.states,
            keep_seconds=rules.keep_seconds,
            batch=batch,
            now=now,
        )
        return int(row["deleted"])

    def _beyond(self, query: str, name: str, state: str, last: int, batch: int) -> int:
        """One batch of the rows past a ``last`` rule, by ``query`` (hot or archive)."""
        [row] = self.db.run(
            QUERIES[query], name=name, state=state, last=last, batch=batch
        )
        return int(row["deleted"])

    def _left(self, rules: Plan, now: datetime) -> int:
        [aged] = self.db.run(
            QUERIES["job_purge_aged_left"],
            names=rules.names,
            states=rules.states,
            keep_seconds=rules.keep_seconds,
            bound=LEFT_BOUND,
            now=now,
        )
        left = int(aged["left"])
        for name, state, last in rules.last:
            [row] = self.db.run(
                QUERIES["job_purge_beyond_last_left"],
                name=name,
                state=state,
                last=last,
                bound=LEFT_BOUND,
            )
            left += int(row["left"])
        return left
