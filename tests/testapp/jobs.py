"""Jobs the test suite runs; their bodies write Record rows the tests read back."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from ultimate_jobs import (
    NO_TENANT,
    Concurrency,
    JobAborted,
    Retry,
    RetryAfter,
    Run,
    Terminal,
    current_tenant,
    job,
)
from ultimate_jobs.ground.exceptions import InvalidJobPayload

from .models import Record


def record(run: Run, key: str, event: str) -> None:
    Record.objects.create(
        key=key,
        event=event,
        attempt=run.attempt,
        job_id=run.job_id,
        pid=os.getpid(),
        tenant_id=current_tenant() or "",
    )


def by_key(p: dict[str, object]) -> str:
    return f"{p['key']}"


@job(idempotency_key=by_key, tenant=NO_TENANT)
def noop(run: Run, key: str) -> None:
    """Does nothing; the drain tests count rows, not records."""


@job(idempotency_key=by_key, tenant=lambda p: p.get("tenant"))
def touch(run: Run, key: str, tenant: str | None = None) -> str:
    record(run, key, "ran")
    return key


@job(idempotency_key=by_key, tenant=NO_TENANT)
async def atouch(run: Run, key: str) -> str:
    from asgiref.sync import sync_to_async

    await sync_to_async(record)(run, key, "ran-async")
    return key


@job(idempotency_key=lambda p: p["key"], tenant=lambda p: p.get("tenant", "t"))
def anything(run: Run, key: Any, value: Any = None, tenant: Any = None) -> None:
    """Takes any key, value and tenant the caller gives: the property tests
    (tests/integration/test_properties.py) read back what an enqueue wrote."""


@job(idempotency_key=by_key, tenant=NO_TENANT)
def typed(
    run: Run, key: str, count: int, ratio: float = 1.0, tags: list[str] | None = None
) -> None:
    record(run, key, f"count={count}")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(
        attempts=4, backoff="exponential", delay="10s", max_delay="5m", jitter=False
    ),
)
def flaky(run: Run, key: str, fail_times: int) -> None:
    record(run, key, "attempt")
    if run.attempt <= fail_times:
        raise RuntimeError(f"failing attempt {run.attempt} of {fail_times}")
    record(run, key, "ran")


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=5, jitter=False))
def terminal(run: Run, key: str) -> None:
    record(run, key, "attempt")
    raise Terminal("this input can never work")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, jitter=False),
    dead_letter=False,
)
def dropped(run: Run, key: str) -> None:
    record(run, key, "attempt")
    raise RuntimeError("always")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", max_delay="1m", jitter=False),
)
def throttled(run: Run, key: str, wait: float) -> None:
    record(run, key, "attempt")
    if run.attempt == 1:
        raise RetryAfter(wait)


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=2, jitter=False, delay="1s"),
)
def raises_payload(run: Run, key: str) -> None:
    raise InvalidJobPayload("testapp.raises_payload", "key", key, "refused by the body")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def hold(run: Run, key: str, seconds: float = 60.0, honour_cancel: bool = True) -> str:
    """Record 'started', then wait until a 'release' record for the key exists (or
    ``seconds`` pass); with honour_cancel, stop as soon as the cancel token is set."""
    record(run, key, "started")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if Record.objects.filter(key=key, event="release").exists():
            break
        if honour_cancel and run.cancel_token.wait(0.05):
            record(run, key, f"cancelled:{run.cancel_token.reason}")
            raise JobAborted(run.cancel_token.reason or "")
        if not honour_cancel:
            time.sleep(0.05)
    record(run, key, "finished")
    return key


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def hold_file(run: Run, key: str, path: str, seconds: float = 60.0) -> None:
    """Like hold, without the database: the evidence goes to ``path``.log and the body
    waits for ``path``.release to exist."""
    log = Path(path + ".log")
    with log.open("a") as out:
        out.write(f"started {run.attempt}\n")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not Path(path + ".release").exists():
        if run.cancel_token.wait(0.05):
            raise JobAborted(run.cancel_token.reason or "")
    with log.open("a") as out:
        out.write(f"finished {run.attempt}\n")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=2, delay="1s", jitter=False),
)
def crash(run: Run, key: str) -> None:
    """Kill the worker process running it, as an out-of-memory kill would."""
    record(run, key, "attempt")
    os.kill(os.getpid(), 9)


settled_log: list[tuple[str, str]] = []


def remember(settled) -> None:
    settled_log.append((str(settled.outcome), settled.name))


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=2, jitter=False),
    on_settled=remember,
)
def watched(run: Run, key: str, fail: bool = False) -> None:
    if fail:
        raise RuntimeError("watched failure")


hook_calls: list[str] = []


def failing_hook(settled) -> None:
    hook_calls.append(str(settled.outcome))
    raise RuntimeError("the notification service is down")


@job(idempotency_key=by_key, tenant=NO_TENANT, on_settled=failing_hook)
def hooked(run: Run, key: str) -> None:
    """Completes; its on_settled hook always raises (P4: 3 tries, then logged)."""
    record(run, key, "ran")


@job(idempotency_key=by_key, tenant=NO_TENANT)
def chatty(run: Run, key: str) -> None:
    """Log through the run's logger and through a logger that knows nothing of the job
    (M2: both lines must carry the job's correlation id)."""
    run.logger.info("testapp.chatty.step", extra={"key": key})
    logging.getLogger("ultimate_jobs.testapp").info(
        "testapp.chatty.plain", extra={"key": key}
    )


from . import (  # noqa: E402
    durable_jobs,  # noqa: F401 - the durable-step tests' jobs
    hardening_jobs,  # noqa: F401 - the hardening tests' jobs (B4-B7)
    redaction_jobs,  # noqa: F401 - the derived-field redaction tests' jobs (B5)
    tenancy_jobs,  # noqa: F401 - the enforced tenancy tests' jobs (B7)
    triage_jobs,  # noqa: F401 - the dead-letter triage tests' jobs (P10)
)

# -- limits (L1, L2): bodies stamp when they start and end (time.time_ns(), one clock
# for every process on the machine), so tests can replay how many ran at once.


def stamp(run: Run, key: str, event: str) -> None:
    record(run, key, f"{event}:{time.time_ns()}")


def wait_for_release(run: Run, key: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if Record.objects.filter(key=key, event="release").exists():
            return
        if run.cancel_token.wait(0.05):
            raise JobAborted(run.cancel_token.reason or "")


@job(idempotency_key=by_key, tenant=NO_TENANT, concurrency=2)
def capped(run: Run, key: str, seconds: float = 0.03) -> None:
    """At most two runs at once, fleet-wide."""
    stamp(run, "capped", "start")
    time.sleep(seconds)
    stamp(run, "capped", "end")


def by_account(p: dict[str, object]) -> str:
    return f"{p['account']}"


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    concurrency=Concurrency(key=by_account, limit=1),
)
def per_account(run: Run, key: str, account: str, seconds: float = 0.02) -> None:
    """At most one run per account at once, fleet-wide; the others wait."""
    stamp(run, account, "start")
    time.sleep(seconds)
    stamp(run, account, "end")


def remember_in_db(settled) -> None:
    key = settled.input["key"] if settled.input else ""
    Record.objects.create(
        key=key,
        event=f"settled:{settled.outcome}:{settled.code or ''}"[:50],
        attempt=settled.attempt,
        job_id=settled.job_id,
        pid=os.getpid(),
    )


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    concurrency=Concurrency(key=by_account, limit=1, when_busy="fail"),
    on_settled=remember_in_db,
)
def exclusive(run: Run, key: str, account: str, seconds: float = 60.0) -> None:
    """One run per account; a second one while the first runs is refused."""
    record(run, key, "started")
    wait_for_release(run, key, seconds)
    record(run, key, "finished")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    concurrency=1,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def solo(run: Run, key: str, seconds: float = 60.0) -> None:
    """One run at a time, fleet-wide; holds its slot until released."""
    record(run, key, "started")
    wait_for_release(run, key, seconds)
    record(run, key, "finished")


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"])
def tenant_work(run: Run, key: str, tenant: str, seconds: float = 0.005) -> None:
    """Some work of one tenant (the per-tenant budget tests read the job rows)."""
    time.sleep(seconds)


@job(idempotency_key=by_key, tenant=lambda p: p.get("tenant"))
def stamped(
    run: Run, key: str, group: str, tenant: str | None = None, seconds: float = 0.05
) -> None:
    """Uncapped: stamps start and end under ``group`` (per-process budget tests)."""
    stamp(run, group, "start")
    time.sleep(seconds)
    stamp(run, group, "end")


@job(idempotency_key=by_key, tenant=NO_TENANT)
def create_invoice(run: Run, key: str) -> None:
    """The first of a pair staged in one transaction (O3 ordering tests)."""
    record(run, key, "invoice")


@job(idempotency_key=by_key, tenant=NO_TENANT)
def charge_card(run: Run, key: str, invoice_job_id: str) -> None:
    """The second of the pair: records the state of the invoice job when it starts.

    ``FOR NO KEY UPDATE`` waits for a claim of the invoice still in flight, so the state
    read is what its claim left: ``None`` means the charge was published first, and
    ``ready`` means a worker claimed the charge first (both forbidden by O3).
    """
    from django.db import transaction

    from ultimate_jobs.models import Job

    with transaction.atomic():
        state = (
            Job.objects.select_for_update(no_key=True)
            .filter(pk=invoice_job_id)
            .values_list("state", flat=True)
            .first()
        )
    record(run, key, f"charge:{state}")


@job(idempotency_key=by_key, tenant=NO_TENANT)
def pickup_stamp(run: Run, key: str) -> None:
    """Record the wall-clock time the body started (pickup measurements): the first
    line runs before the body's database connection is opened."""
    started = time.time()
    record(run, key, f"started:{started:.6f}")


# The factory jobs the process tests run: exports and webhooks (F4, F5), a backfill (F1).
from . import (  # noqa: E402
    backfill_jobs,  # noqa: F401
    console_jobs,  # noqa: F401 - issue 15: the operator console
    factory_jobs,  # noqa: F401
    seed_jobs,  # noqa: F401 - issue 20: spans, per-run logs, signals
    workflow_jobs,  # noqa: F401 - issue 28: fan-out and fan-in
)


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def exits(run: Run, key: str, how: str) -> None:
    """Raise SystemExit or KeyboardInterrupt from the body, as exit() or a stray
    ``raise KeyboardInterrupt`` would: the attempt fails, the thread lives on."""
    record(run, key, how)
    if how == "system-exit":
        raise SystemExit(f"{key} exits")
    raise KeyboardInterrupt(f"{key} interrupts")


if os.environ.get("UJ_TEST_NEXT_DEPLOY") == "1":  # a worker of the next deploy
    from . import next_deploy_jobs  # noqa: F401


@job(idempotency_key=by_key, tenant=NO_TENANT)
def returns_on_cancel(run: Run, key: str, seconds: float = 120.0) -> None:
    """Return (not raise) once the cancel token is set: the pattern the docs warn of
    (issue 30); the worker marks it done and logs a warning."""
    record(run, key, "started")
    if run.cancel_token.wait(seconds):
        record(run, key, f"returned:{run.cancel_token.reason}")


from . import versioned_jobs  # noqa: E402, F401 - P11: version 1, or 2 in the next deploy
