"""The jobs of the chaos run (benchmarks/chaos, docs/operations.md).

Every body keeps its own record, apart from the database: one JSON line per event in
``$UJ_CHAOS_RECORDS/<pid>.jsonl`` (appended with one write, so a SIGKILL loses no
line that was written). The chaos run checks these against the rows: ``start`` and
``finish`` of every execution, ``fail`` of a planned failure, ``step`` with a nonce
each time a step function really runs (the stored output must be the nonce of the
last one: a step that ran again after its checkpoint committed would not be).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime
from typing import Any

from django.db import connection

from ultimate_jobs import NO_TENANT, Concurrency, Retry, Run, job, task

QUEUE = "chaos"
# Lapsed leases count attempts too: room for many, so a job killed again and again is
# still done in the end (a run-out job would be reported, not hidden).
RETRY = Retry(attempts=25, backoff="exponential", delay="200ms", max_delay="1s")


def note(kind: str, run: Run, **fields: Any) -> None:
    """Append one record of this body's own, outside the database."""
    line = json.dumps(
        {
            "k": kind,
            "job": str(run.job_id),
            "name": run.name,
            "att": run.attempt,
            "pid": os.getpid(),
            "t": time.time(),
            **fields,
        }
    )
    path = os.path.join(os.environ["UJ_CHAOS_RECORDS"], f"{os.getpid()}.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def by_key(p: dict[str, Any]) -> str:
    return str(p["key"])


@job(idempotency_key=by_key, tenant=NO_TENANT, queue=QUEUE, retry=RETRY)
def plain(run: Run, key: str, ms: int = 10) -> None:
    """A body that works for ``ms`` milliseconds."""
    note("start", run)
    time.sleep(ms / 1000)
    note("finish", run)


@job(idempotency_key=by_key, tenant=NO_TENANT, queue=QUEUE, retry=RETRY)
def staged(run: Run, key: str, ms: int = 10) -> None:
    """The same, enqueued inside a transaction (through the outbox, O1)."""
    note("start", run)
    time.sleep(ms / 1000)
    note("finish", run)


@job(idempotency_key=by_key, tenant=NO_TENANT, queue=QUEUE, retry=RETRY)
def retrying(run: Run, key: str, fails: int) -> None:
    """Fails its first ``fails`` attempts on purpose, then completes."""
    note("start", run)
    if run.attempt <= fails:
        note("fail", run)
        raise RuntimeError(f"planned failure {run.attempt} of {fails}")
    note("finish", run)


def stepped_value(run: Run, step: str) -> str:
    nonce = uuid.uuid4().hex
    note("step", run, step=step, nonce=nonce)
    return nonce


def effect(run: Run, step: str) -> str:
    """An atomic step's write: one row per execution, in the step's transaction."""
    nonce = uuid.uuid4().hex
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_effect (job_id, step, nonce) VALUES (%s, %s, %s)",
            [str(run.job_id), step, nonce],
        )
    note("step", run, step=step, nonce=nonce)
    return nonce


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    queue=QUEUE,
    retry=RETRY,
    event_poll="2s",
)
def stepped(run: Run, key: str) -> None:
    """Steps, a sleep, an event wait and an atomic step (S1, S3, S4, S9)."""
    note("start", run)
    run.step("first", lambda: stepped_value(run, "first"))
    run.sleep("nap", "1s")
    run.wait_for_event("go", "chaos.go", match={"key": key}, timeout="30m")
    run.step("second", lambda: stepped_value(run, "second"))
    run.atomic_step("third", lambda: effect(run, "third"))
    note("finish", run)


def by_account(p: dict[str, Any]) -> str:
    return str(p["account"])


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    queue=QUEUE,
    retry=RETRY,
    concurrency=Concurrency(key=by_account, limit=1),
)
def keyed(run: Run, key: str, account: str) -> None:
    """At most one run per account at once, fleet-wide (L2)."""
    note("start", run, account=account)
    time.sleep(0.02)
    note("finish", run, account=account)


@job(
    idempotency_key=lambda p: f"{p['task']}@{p['occurrence']}",
    tenant=NO_TENANT,
    queue=QUEUE,
    retry=RETRY,
)
def ticked(run: Run, task: str, occurrence: str) -> None:
    """What the every-minute tasks fire: one per task and occurrence."""
    note("start", run)
    note("finish", run)


def fire(name: str) -> Any:
    def entries(occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
        return [(ticked, {"task": name, "occurrence": occurrence.isoformat()})]

    entries.__name__ = name
    return entries


TASKS = [
    task(cron="* * * * *", tz="UTC", catch_up="run-all", name=f"chaosapp.minute_{x}")(
        fire(f"chaosapp.minute_{x}")
    )
    for x in "abc"
]
