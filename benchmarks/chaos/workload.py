"""The jobs of a chaos run, enqueued in waves while the faults go on.

A wave is one statement per kind: plain, retrying, stepped and keyed jobs go in
directly (``enqueue_many``); staged ones inside ``transaction.atomic()``, so through
the outbox and the relays (O1). The stepped jobs' events are published right after
(S4: an answer published before the wait is kept).

The database may be down or restarting when a wave is sent. A failed wave is sent
again only once it is known not to have landed (its keys are looked up, in the jobs
table or the outbox), so the driver itself never enqueues a job twice.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from tests.chaosapp.jobs import keyed, plain, retrying, staged, stepped
from ultimate_jobs import JobsError, publish_event
from ultimate_jobs.models import Job, JobArchive, OutboxMessage

ACCOUNTS = 20  # keys of the keyed limit
MIX = (  # kind, share of the jobs
    ("plain", 0.40),
    ("retrying", 0.15),
    ("stepped", 0.10),
    ("keyed", 0.15),
    ("staged", 0.20),
)


@dataclass
class Workload:
    """Everything the driver enqueued, by job id."""

    total: int
    waves: int
    seed: int
    expected: dict[str, str] = field(default_factory=dict)  # job id -> kind
    retried_waves: int = 0
    events: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None  # what stopped the enqueuing thread, if any

    def kinds(self) -> Counter[str]:
        return Counter(self.expected.values())


def inputs(
    kind: str, wave: int, count: int, rng: random.Random
) -> list[dict[str, Any]]:
    keys = [f"{kind}-{wave}-{i}" for i in range(count)]
    if kind in ("plain", "staged"):
        return [{"key": k, "ms": rng.randint(20, 250)} for k in keys]
    if kind == "retrying":
        return [{"key": k, "fails": rng.randint(1, 2)} for k in keys]
    if kind == "keyed":
        return [{"key": k, "account": f"acct-{rng.randrange(ACCOUNTS)}"} for k in keys]
    return [{"key": k} for k in keys]


HANDLES = {
    "plain": plain,
    "retrying": retrying,
    "stepped": stepped,
    "keyed": keyed,
    "staged": staged,
}


def landed(kind: str, rows: list[dict[str, Any]]) -> list[str] | None:
    """The ids of a wave that reached the database already, or None."""
    keys = [row["key"] for row in rows]
    models = (OutboxMessage,) if kind == "staged" else (Job, JobArchive)  # Q2
    found = {
        key: job_id
        for model in models
        for key, job_id in model.objects.filter(
            name=HANDLES[kind].name, idempotency_key__in=keys
        ).values_list("idempotency_key", "id")
    }
    if not found:
        return None
    assert len(found) == len(keys), (kind, len(found), len(keys))
    return [str(found[key]) for key in keys]


def send(kind: str, rows: list[dict[str, Any]]) -> list[str]:
    handle = HANDLES[kind]
    if kind == "staged":
        with transaction.atomic():
            answers = handle.enqueue_many(rows)
    else:
        answers = handle.enqueue_many(rows)
    return [str(a.id) for a in answers]


def until_sent(work: Workload, kind: str, rows: list[dict[str, Any]]) -> list[str]:
    """Send a wave; after a failure, look it up and send it again only if absent."""
    first = True
    while True:
        try:
            if not first and (ids := landed(kind, rows)) is not None:
                return ids
            return send(kind, rows)
        except (JobsError, Exception) as exc:  # the database is down or restarting
            if not _is_database_error(exc):
                raise
            first = False
            work.retried_waves += 1
            connection.close()
            time.sleep(0.5)


def _is_database_error(exc: BaseException) -> bool:
    from django.db import Error as DjangoError

    return isinstance(exc, JobsError | DjangoError) or "connection" in str(exc).lower()


def publish_go(work: Workload, keys: list[str]) -> None:
    for key in keys:
        while True:
            try:
                publish_event("chaos.go", {"key": key})
                work.events += 1
                break
            except Exception as exc:
                if not _is_database_error(exc):
                    raise
                connection.close()
                time.sleep(0.5)


def run(work: Workload, duration: float) -> None:
    """Enqueue ``work.total`` jobs in ``work.waves`` waves spread over ``duration``
    (in a thread: an error is kept in ``work.error`` for the driver to raise)."""
    try:
        _run(work, duration)
    except BaseException as exc:
        work.error = exc
        raise
    finally:
        work.done.set()


def _run(work: Workload, duration: float) -> None:
    rng = random.Random(work.seed)
    per_wave = max(work.total // work.waves, 1)
    started = time.monotonic()
    sent = 0
    for wave in range(work.waves):
        count = per_wave if wave < work.waves - 1 else work.total - sent
        remaining = count
        for index, (kind, share) in enumerate(MIX):
            n = remaining if index == len(MIX) - 1 else round(count * share)
            n = min(n, remaining)
            remaining -= n
            if n <= 0:
                continue
            rows = inputs(kind, wave, n, rng)
            for job_id in until_sent(work, kind, rows):
                work.expected[job_id] = kind
            if kind == "stepped":
                publish_go(work, [row["key"] for row in rows])
        sent += count
        due = started + duration * (wave + 1) / work.waves
        time.sleep(max(due - time.monotonic(), 0))
