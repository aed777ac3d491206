"""Retention rules (F6): how long finished jobs of each state are kept, checked.

``retention={"done": {"last": 7}, "dead": {"days": 30}}`` on ``@job`` and the
``RETENTION`` setting are written in the same form; this module checks it. Which rows
the rules keep is decided by ultimate_jobs.retention. Pure: no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import JobDeclarationInvalid

RETENTION_STATES = ("done", "failed", "dead", "cancelled")


def check_retention(value: object, job: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise JobDeclarationInvalid(
            "retention", value, "a mapping like {'done': {'days': 3}}", job=job
        )
    out: dict[str, Any] = {}
    for state, rule in value.items():
        where = f"retention.{state}"
        if state not in RETENTION_STATES:
            raise JobDeclarationInvalid(
                where, rule, f"state is one of {', '.join(RETENTION_STATES)}", job=job
            )
        if rule is False:
            out[state] = False
            continue
        if not isinstance(rule, Mapping) or not rule or set(rule) - {"last", "days"}:
            raise JobDeclarationInvalid(
                where, rule, "{'last': n}, {'days': n}, both, or False", job=job
            )
        last, days = rule.get("last"), rule.get("days")
        refuse = partial(JobDeclarationInvalid, job=job)
        if last is not None:
            validate.whole(last, field=f"{where}.last", error=refuse)
        if days is not None:
            validate.positive(
                days,
                field=f"{where}.days",
                error=refuse,
                reason="a positive number of days",
            )
        out[state] = dict(rule)
    return out
