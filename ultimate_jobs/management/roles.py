"""The roles one process can play (W1): worker, and the others as they register.

``manage.py jobs_worker --roles worker,...`` builds one object per role and runs them
together; ``jobs_relay`` and ``jobs_scheduler`` run one role each. Every role is a loop
object with ``run()`` that returns when the shared Lifecycle stops (after draining).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ultimate_jobs.conf import JobsSettings
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.maintenance.host import Maintenance
from ultimate_jobs.runtime.budget import warn_at_start
from ultimate_jobs.runtime.lifecycle import Lifecycle
from ultimate_jobs.runtime.relay import BATCH_SIZE, Relay
from ultimate_jobs.runtime.rides import Rides
from ultimate_jobs.runtime.share import SlotShare
from ultimate_jobs.runtime.wake import Wake
from ultimate_jobs.runtime.worker import Worker
from ultimate_jobs.scheduling.scheduler import Scheduler

logger = logging.getLogger(__name__)


class Role(Protocol):
    """A loop of one process: runs until the lifecycle stops."""

    name: str

    def run(self) -> int: ...


@dataclass
class RoleOptions:
    """What the command line says about the roles of one process."""

    settings: JobsSettings
    lifecycle: Lifecycle
    queues: Sequence[str] | None = None
    concurrency: int | None = None
    worker_id: str | None = None
    max_jobs: int | None = None
    wake: Wake | None = None  # the process's LISTEN session (None: poll only)
    extra: dict[str, Any] = field(default_factory=dict)
    # Q1: one LISTEN session per alias that holds jobs tables (``wake`` is DATABASE's).
    wakes: dict[str, Wake] = field(default_factory=dict)
    # N2: what a worker's idle poll carries for the process's other roles (rides.py)
    rides: Rides = field(default_factory=Rides)

    def wake_of(self, alias: str) -> Wake | None:
        return self.wakes.get(
            alias, self.wake if alias == self.settings.DATABASE else None
        )


class Together:
    """Several loops of one role (one per alias, Q1) run as one: each in a thread of
    its own, stopped together by the shared lifecycle."""

    def __init__(
        self, name: str, members: Sequence[Role], lifecycle: Lifecycle
    ) -> None:
        self.name = name
        self.members = list(members)
        self.lifecycle = lifecycle

    def run(self) -> int:
        codes: list[int] = []

        def run(member: Role) -> None:
            try:
                codes.append(member.run())
            except Exception:
                logger.exception("jobs.role.crashed", extra={"role": self.name})
                codes.append(1)
            finally:
                self.lifecycle.stop()  # one loop ending ends its siblings too

        threads = [
            threading.Thread(
                target=run, args=(member,), name=f"jobs-{self.name}", daemon=True
            )
            for member in self.members[1:]
        ]
        for thread in threads:
            thread.start()
        run(self.members[0])
        for thread in threads:
            thread.join()
        return max(codes, default=0)


RoleFactory = Callable[[RoleOptions], Role]


def _worker(options: RoleOptions) -> Role:
    """One Worker per alias that holds a served queue (Q1), sharing one slot budget;
    a single Worker when every served queue lives on one alias."""
    settings = options.settings
    queues = list(options.queues or settings.QUEUES or registry.queues() or ["default"])
    by_alias = settings.queues_by_alias(queues)
    concurrency = options.concurrency or settings.CONCURRENCY
    share = SlotShare(concurrency) if len(by_alias) > 1 else None
    workers = [
        Worker(
            queues=served,
            concurrency=concurrency,
            worker_id=options.worker_id,
            max_jobs=options.max_jobs,
            settings=settings,
            lifecycle=options.lifecycle,
            wake=options.wake_of(alias),
            limits=options.extra.get("limits"),  # per-process budgets (L3)
            alias=alias,
            share=share,
            prefetch=options.extra.get("prefetch"),
            rides=options.rides,
        )
        for alias, served in by_alias.items()
    ]
    if len(workers) == 1:
        return workers[0]
    return Together("worker", workers, options.lifecycle)


def _scheduler(options: RoleOptions) -> Role:
    """One Scheduler per alias that holds jobs tables (Q1), each competing for its own
    alias's leader lease and firing the rows of the queues that live there."""
    schedulers = [
        Scheduler(
            settings=options.settings,
            lifecycle=options.lifecycle,
            wake=options.wake_of(alias),
            alias=alias,
            rides=options.rides,
        )
        for alias in options.settings.aliases
    ]
    if len(schedulers) == 1:
        return schedulers[0]
    return Together("scheduler", schedulers, options.lifecycle)


def _relay(options: RoleOptions) -> Role:
    """One Relay per alias that holds jobs tables (Q1): each claims its alias's outbox
    and publishes every row into its queue's alias."""
    relays = [
        Relay(
            settings=options.settings,
            lifecycle=options.lifecycle,
            wake=options.wake_of(alias),
            relay_id=options.worker_id,
            batch_size=options.extra.get("batch_size", BATCH_SIZE),
            alias=alias,
            rides=options.rides,
        )
        for alias in options.settings.aliases
    ]
    if len(relays) == 1:
        return relays[0]
    return Together("relay", relays, options.lifecycle)


def _maintenance(options: RoleOptions) -> Role:
    """The leader's chores on their own lease (maintenance/host.py), one host per
    alias (Q1): for a deployment that runs workers and no scheduler. A scheduler runs
    the same chores on its own lease."""
    hosts = [
        Maintenance(settings=options.settings, lifecycle=options.lifecycle, alias=alias)
        for alias in options.settings.aliases
    ]
    if len(hosts) == 1:
        return hosts[0]
    return Together("maintenance", hosts, options.lifecycle)


ROLES: dict[str, RoleFactory] = {
    "worker": _worker,
    "scheduler": _scheduler,
    "relay": _relay,
    "maintenance": _maintenance,
}
# W1: one command makes a small deployment work.
DEFAULT_ROLES = ("worker", "scheduler", "relay")


def register_role(name: str, factory: RoleFactory) -> None:
    """Make a role available to ``jobs_worker --roles``."""
    ROLES[name] = factory


def run_roles(roles: Sequence[Role], lifecycle: Lifecycle) -> int:
    """Run the first role in this thread and the others beside it; stop them together."""
    if not roles:
        return 0
    codes: dict[str, int] = {}

    def run(role: Role) -> None:
        try:
            codes[role.name] = role.run()
        except Exception:
            logger.exception("jobs.role.crashed", extra={"role": role.name})
            codes[role.name] = 1
        finally:
            lifecycle.stop()  # one role ending ends the process's other roles too

    threads = [
        threading.Thread(
            target=run, args=(role,), name=f"jobs-{role.name}", daemon=True
        )
        for role in roles[1:]
    ]
    for thread in threads:
        thread.start()
    run(roles[0])
    for thread in threads:
        thread.join()
    return max(codes.values(), default=0)


def serve(names: Sequence[str], settings: JobsSettings, **options: Any) -> int:
    """Run the named roles in this process until SIGTERM/SIGINT: the body of
    ``jobs_worker``, ``jobs_relay`` and ``jobs_scheduler``.

    One Lifecycle takes the signals and one LISTEN session (when ``WAKE``) serves every
    role. ``options`` are the fields of RoleOptions (queues, concurrency, worker_id,
    max_jobs, extra).
    """
    lifecycle = Lifecycle(drain_timeout=settings.DRAIN_TIMEOUT)
    lifecycle.install_signals()
    # Issue 31: warn when this process would leave operators no connection, or when
    # the alias commits asynchronously (runtime/budget.py).
    warn_at_start(settings, names, options.get("concurrency"))
    wakes = (
        {alias: Wake(alias, stop=lifecycle.stopping) for alias in settings.aliases}
        if settings.WAKE
        else {}
    )
    role_options = RoleOptions(
        settings=settings,
        lifecycle=lifecycle,
        wake=wakes.get(settings.DATABASE),
        wakes=wakes,
        **options,
    )
    return run_roles([ROLES[name](role_options) for name in names], lifecycle)
