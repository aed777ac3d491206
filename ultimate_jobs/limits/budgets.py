"""Per-process budgets (L3): per queue, per tenant, global, and a rate per tenant.

Two layers, and the difference matters (docs/limits.md):

* Fleet caps, ``concurrency=N`` and ``Concurrency(key=..., limit=N)`` on a job, hold
  across every worker: the claim takes a slot row per run (limits/slots.py), and
  ``fleet_caps`` (below) turns the registry into the claim's ``cap_*`` parameters,
  and ``claim_parameters`` adds the budgets' room: every limit parameter of the claim.
* Per-process budgets, ``Limits(per_queue=..., per_tenant=..., total=...,
  rate_per_tenant=...)`` (``jobs_worker --per-queue/--per-tenant/--global-limit/
  --rate-per-tenant``), live in this process's memory (this module): ``--per-tenant 2``
  on twenty replicas is forty runs of one tenant, and a restart grants every tenant a
  fresh rate allowance. The claim is told how much room each budget has left, and
  skips rows with none before its LIMIT, so a budget never hands a row back.
"""

from __future__ import annotations

import logging
import math
import re
import time
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ultimate_jobs.declaration.definition import Concurrency
from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.sql.rows import ClaimedJob

logger = logging.getLogger(__name__)

_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*(s|m|h))?\s*$")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}


MAX_BUDGET = 100_000  # a budget past any process's thread count is a typo


def parse_rate(value: object, *, field_name: str = "rate_per_tenant") -> float:
    """Starts per second from ``5``, ``2.5``, ``"10/s"``, ``"600/m"`` or ``"100/h"``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        rate = float(value)
    elif isinstance(value, str) and (match := _RATE.match(value)):
        rate = float(match.group(1)) / _PER[match.group(2) or "s"]
    else:
        raise InvalidArgument(field_name, value, "a rate like 10, '10/s', '600/m'")
    if not math.isfinite(rate) or rate <= 0:
        raise InvalidArgument(field_name, value, "a positive rate")
    return rate


def parse_queue_budgets(value: str, *, field_name: str = "per_queue") -> dict[str, int]:
    """``"mail=4,reports=1"`` as ``{"mail": 4, "reports": 1}``."""
    budgets: dict[str, int] = {}
    for part in (p.strip() for p in value.split(",")):
        name, sep, number = part.partition("=")
        if not sep or not re.fullmatch(r"[0-9]{1,9}", number.strip()):
            raise InvalidArgument(field_name, value, "queue=N pairs, e.g. 'mail=4'")
        queue = validate_queue(name.strip(), field=field_name)
        budgets[queue] = validate.whole(
            int(number), field=f"{field_name}.{queue}", most=MAX_BUDGET
        )
    return budgets


@dataclass(frozen=True)
class Limits:
    """Per-process budgets of one worker; ``None`` (or no entry) is no budget (L3).

    ``per_queue``: in-flight runs per queue; ``per_tenant``: in-flight runs per tenant;
    ``total``: in-flight runs across every queue (the thread count always bounds it
    too); ``rate_per_tenant``: runs started per second per tenant (a token bucket of
    one second's worth, at least one). Jobs without a tenant (``NO_TENANT``) are not
    counted against tenant budgets.
    """

    per_queue: Mapping[str, int] = field(default_factory=dict)
    per_tenant: int | None = None
    total: int | None = None
    rate_per_tenant: float | None = None

    def __post_init__(self) -> None:
        checked = {
            validate_queue(queue, field="per_queue"): validate.whole(
                n, field=f"per_queue.{queue}", most=MAX_BUDGET
            )
            for queue, n in dict(self.per_queue).items()
        }
        object.__setattr__(self, "per_queue", checked)
        if self.per_tenant is not None:
            validate.whole(self.per_tenant, field="per_tenant", most=MAX_BUDGET)
        if self.total is not None:
            validate.whole(self.total, field="total", most=MAX_BUDGET)
        if self.rate_per_tenant is not None:
            object.__setattr__(
                self, "rate_per_tenant", parse_rate(self.rate_per_tenant)
            )

    @property
    def bounded(self) -> bool:
        """Whether any budget is set."""
        return bool(
            self.per_queue
            or self.per_tenant is not None
            or self.total is not None
            or self.rate_per_tenant is not None
        )


def add_limit_arguments(parser: ArgumentParser) -> None:
    """The per-process budget options of ``jobs_worker``."""
    group = parser.add_argument_group(
        "per-process budgets",
        "Each worker process enforces its own: multiply by the number of processes "
        "(see docs/limits.md). Fleet-wide caps are declared on jobs (concurrency=).",
    )
    group.add_argument(
        "--per-queue", metavar="QUEUE=N[,...]", help="in-flight runs per queue"
    )
    group.add_argument(
        "--per-tenant", type=int, metavar="N", help="in-flight runs per tenant"
    )
    group.add_argument(
        "--global-limit",
        type=int,
        metavar="N",
        help="in-flight runs across every queue (never more than --concurrency)",
    )
    group.add_argument(
        "--rate-per-tenant",
        metavar="RATE",
        help="runs started per tenant: 10 (per second), '10/s', '600/m', '100/h'",
    )


def limits_from_options(options: Mapping[str, Any]) -> Limits:
    """``Limits`` from parsed ``jobs_worker`` options; bad values name the option."""
    per_queue, per_tenant = options.get("per_queue"), options.get("per_tenant")
    total, rate = options.get("global_limit"), options.get("rate_per_tenant")
    return Limits(
        per_queue=parse_queue_budgets(per_queue, field_name="--per-queue")
        if per_queue
        else {},
        per_tenant=None
        if per_tenant is None
        else validate.whole(per_tenant, field="--per-tenant", most=MAX_BUDGET),
        total=None
        if total is None
        else validate.whole(total, field="--global-limit", most=MAX_BUDGET),
        rate_per_tenant=None
        if rate is None
        else parse_rate(rate, field_name="--rate-per-tenant"),
    )


class Budget:
    """The room a worker's budgets leave, from the runs it holds and its rate buckets.

    Not thread-safe: the claim loop alone asks it (under the worker's lock for held).
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self._tokens: dict[str, tuple[float, float]] = {}  # tenant: (tokens, at)

    @property
    def capacity(self) -> float:
        rate = self.limits.rate_per_tenant
        return max(1.0, rate) if rate is not None else math.inf

    def _bucket(self, tenant: str, now: float) -> float:
        rate = self.limits.rate_per_tenant
        if rate is None or tenant not in self._tokens:
            return self.capacity
        tokens, at = self._tokens[tenant]
        return min(self.capacity, tokens + (now - at) * rate)

    def free(self, slots: int, held: Sequence[ClaimedJob]) -> int:
        """How many more runs this process may hold: threads, then ``total``."""
        free = slots - len(held)
        if self.limits.total is not None:
            free = min(free, self.limits.total - len(held))
        return free

    def claim_parameters(
        self, queues: Sequence[str], held: Sequence[ClaimedJob]
    ) -> dict[str, Any]:
        """The claim's ``queue_rooms``, ``tenant_ids``, ``tenant_rooms``, ``tenant_room``."""
        limits, now = self.limits, self.clock()
        by_queue = Counter(row["queue"] for row in held)
        by_tenant = Counter(row["tenant_id"] for row in held if row["tenant_id"])
        rooms: dict[str, int] = {}
        for tenant in {*by_tenant, *self._tokens}:
            room = math.inf
            if limits.per_tenant is not None:
                room = limits.per_tenant - by_tenant[tenant]
            if limits.rate_per_tenant is not None:
                room = min(room, math.floor(self._bucket(tenant, now)))
            if room != math.inf:
                rooms[tenant] = int(room)
        default = min(
            limits.per_tenant if limits.per_tenant is not None else math.inf,
            self.capacity,
        )
        return {
            "queue_rooms": [
                limits.per_queue[q] - by_queue[q] if q in limits.per_queue else None
                for q in queues
            ],
            "tenant_ids": list(rooms),
            "tenant_rooms": list(rooms.values()),
            "tenant_room": None if default == math.inf else math.floor(default),
        }

    def started(self, rows: Iterable[ClaimedJob]) -> None:
        """Spend one rate token per claimed run of a tenant."""
        if self.limits.rate_per_tenant is None:
            return
        now = self.clock()
        for row in rows:
            if tenant := row["tenant_id"]:
                self._tokens[tenant] = (self._bucket(tenant, now) - 1, now)
        for tenant in [
            t for t in self._tokens if self._bucket(t, now) >= self.capacity
        ]:
            del self._tokens[tenant]  # full again: the same as never seen

    def retry_in(self) -> float | None:
        """Seconds until a tenant out of rate tokens has one again (None: none is)."""
        rate, now = self.limits.rate_per_tenant, self.clock()
        if rate is None:
            return None
        waits = [
            (1 - tokens) / rate
            for tenant in self._tokens
            if (tokens := self._bucket(tenant, now)) < 1
        ]
        return max(min(waits), 0.01) if waits else None


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
