"""Upper bounds on the counts the commands take (B4, issue 31).

A count flag without a ceiling is a fork storm or a thread storm by configuration:
``jobs_worker --processes 1000`` forked hundreds of processes on a 2-core machine and
``--concurrency 100000`` ended in "can't start new thread". Every count flag of every
management command is checked here before anything starts, and a value out of range
is refused with a coded ``InvalidArgument`` naming the flag and the value.

``--processes`` is bounded by the machine: at most ``PROCESSES_PER_CPU`` times the CPU
count, which ``--force`` lifts up to the hard ceiling ``MAX_PROCESSES`` (never more).
"""

from __future__ import annotations

import os

from ultimate_jobs.conf import MAX_THREADS
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.exceptions import InvalidArgument

PROCESSES_PER_CPU = 4
MAX_PROCESSES = 256  # even with --force
MAX_CONCURRENCY = MAX_THREADS  # handler threads per process, as CONCURRENCY
MAX_BATCH_SIZE = 10_000  # rows a relay claims per pass
MAX_BUDGET = 100_000  # --per-queue N, --per-tenant, --global-limit
MAX_JOBS = 2**31 - 1  # --max-jobs
MAX_PORT = 65_535


def check_count(flag: str, value: object, *, high: int, low: int = 1) -> int:
    """``value`` as a whole number from ``low`` to ``high``; InvalidArgument otherwise."""
    return validate.whole(value, field=flag, least=low, most=high)


def process_ceiling(*, force: bool, cpus: int | None = None) -> int:
    """How many processes ``--processes`` may ask for on this machine."""
    if force:
        return MAX_PROCESSES
    count = cpus if cpus is not None else (os.cpu_count() or 1)
    return min(MAX_PROCESSES, max(1, count) * PROCESSES_PER_CPU)


def check_processes(value: object, *, force: bool, cpus: int | None = None) -> int:
    """``--processes``: at most the CPU count times PROCESSES_PER_CPU unless --force."""
    high = process_ceiling(force=force, cpus=cpus)
    number = isinstance(value, int) and not isinstance(value, bool)
    if not force and number and high < value:  # type: ignore[operator]
        raise InvalidArgument(
            "--processes",
            value,
            f"at most {high} on this machine ({PROCESSES_PER_CPU} per CPU); "
            f"--force allows up to {MAX_PROCESSES}",
        )
    return check_count("--processes", value, high=high)
