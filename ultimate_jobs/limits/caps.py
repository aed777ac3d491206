"""Fleet caps (L1, L2) as the claim's parameters: what the registry declares, and the
room each per-process budget has left (L3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ultimate_jobs.declaration.definition import Concurrency
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.limits.budgets import Budget
from ultimate_jobs.sql.rows import ClaimedJob


def fleet_caps(jobs: Registry) -> dict[str, list[Any]]:
    """The claim's ``cap_names``, ``cap_limits``, ``cap_modes`` for declared caps."""
    names: list[str] = []
    limits: list[int] = []
    modes: list[str] = []
    for handle in jobs:
        concurrency = handle.definition.concurrency
        if concurrency is None:
            continue
        names.append(handle.name)
        if isinstance(concurrency, Concurrency):
            limits.append(concurrency.limit)
            modes.append(concurrency.when_busy)
        else:
            limits.append(concurrency)
            modes.append("job")
    return {"cap_names": names, "cap_limits": limits, "cap_modes": modes}


def claim_parameters(
    jobs: Registry,
    budget: Budget | None = None,
    *,
    queues: Sequence[str] = (),
    held: Sequence[ClaimedJob] = (),
) -> dict[str, Any]:
    """Every limit parameter of ``job_claim``: the fleet caps and the budgets' room."""
    rooms = (budget or Budget()).claim_parameters(queues, held)
    return {**fleet_caps(jobs), **rooms}
