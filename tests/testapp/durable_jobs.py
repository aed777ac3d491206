"""Jobs of the durable-step tests (S1-S9); imported by jobs.py so workers see them.

Bodies write Record rows the tests read back; a body that must stop half way (to be
killed there) waits on files named after its ``gate``: ``<gate>.reached`` says it got
there, ``<gate>.release`` lets it go on.
"""

from __future__ import annotations

import time
from pathlib import Path

from ultimate_jobs import NO_TENANT, JobAborted, Retry, Run, job

from .models import Record


def record(run: Run, key: str, event: str) -> None:
    from .jobs import record as write

    write(run, key, event)


def by_key(p: dict[str, object]) -> str:
    return f"{p['key']}"


def events(key: str) -> list[str]:
    return list(Record.objects.filter(key=key).values_list("event", flat=True))


def hold_at(gate: str) -> None:
    """Say the body got to ``gate`` and wait there until the test releases it."""
    Path(gate + ".reached").touch()
    while not Path(gate + ".release").exists():
        time.sleep(0.02)


# -- S1-S3: the seed's onboarding example ---------------------------------------------


def provision(run: Run, key: str) -> dict[str, str]:
    record(run, key, "provision")
    return {"org": key, "plan": "pro"}


def send_welcome(run: Run, key: str, org: dict[str, str], failures: int) -> bool:
    record(run, key, f"welcome:{org['plan']}")
    if run.attempt <= failures:
        raise RuntimeError("the mail server is down")
    return True


@job(
    idempotency_key=lambda p: f"onboard:{p['key']}",
    tenant=NO_TENANT,
    retry=Retry(attempts=5, backoff="exponential", delay="1s", jitter=False),
)
def onboard(run: Run, key: str, email_failures: int = 1) -> str:
    org = run.step("provision", lambda: provision(run, key))
    run.step("welcome-email", lambda: send_welcome(run, key, org, email_failures))
    run.sleep("3d")
    run.step("nudge", lambda: record(run, key, "nudge"))
    return org["org"]


# -- S1: fan-out, one step per child --------------------------------------------------


@job(idempotency_key=lambda p: f"child:{p['child']}", tenant=NO_TENANT)
def fan_child(run: Run, child: str) -> None:
    record(run, child, "child-ran")


def enqueue_child(run: Run, key: str, child: str) -> str:
    record(run, key, f"enqueue:{child}")
    return str(fan_child.enqueue(child=child).id)


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def fan_out(run: Run, key: str, children: list[str], gate: str = "") -> list[str]:
    ids = []
    for index, child in enumerate(children):
        ids.append(
            run.step(f"enqueue:{child}", lambda c=child: enqueue_child(run, key, c))
        )
        if gate and run.attempt == 1 and index == len(children) // 2:
            hold_at(gate)  # SIGKILLed here, half way
    return ids


# -- S3: a short sleep (the worker's local timer) -------------------------------------


@job(idempotency_key=by_key, tenant=NO_TENANT)
def nap(run: Run, key: str, seconds: float) -> None:
    record(run, key, "before")
    run.sleep(seconds)
    record(run, key, "after")


@job(idempotency_key=by_key, tenant=NO_TENANT)
def swallower(run: Run, key: str) -> str:
    try:
        run.sleep("nap", "1h")
    except BaseException:  # wrong: a body must re-raise RunSuspended
        record(run, key, "swallowed")
    record(run, key, "went-on")
    return "done"


@job(idempotency_key=by_key, tenant=NO_TENANT)
async def async_steps(run: Run, key: str) -> int:
    from asgiref.sync import sync_to_async

    value = await sync_to_async(run.step)("first", lambda: {"v": 41})
    await sync_to_async(run.sleep)("1h")
    await sync_to_async(record)(run, key, f"after:{value['v']}")
    return int(value["v"]) + 1


# -- S4: events -----------------------------------------------------------------------


@job(idempotency_key=by_key, tenant=NO_TENANT, event_poll="1h")
def await_payment(
    run: Run,
    key: str,
    order: str,
    timeout: float | None = None,
    timeout_ok: bool = False,
) -> object:
    record(run, key, "asked")
    paid = run.wait_for_event(
        "paid",
        "order.paid",
        match={"order": order},
        timeout=timeout,
        timeout_ok=timeout_ok,
    )
    record(run, key, f"paid:{paid['amount'] if paid else None}")
    return paid


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], event_poll="1h")
def await_tenant_event(run: Run, key: str, tenant: str) -> object:
    got = run.wait_for_event("signed", "contract.signed")
    record(run, key, f"signed:{got['by']}")
    return got


@job(idempotency_key=by_key, tenant=NO_TENANT, event_poll="1h")
def await_twice(run: Run, key: str) -> list[object]:
    first = run.wait_for_event("first", "ping")
    second = run.wait_for_event("second", "ping")
    record(run, key, f"got:{first['n']},{second['n']}")
    return [first, second]


# -- S5: a staged job -----------------------------------------------------------------


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=2, delay="1s", jitter=False),
)
def recover_cart(
    run: Run, key: str, stage: str = "remind", flaky: bool = False
) -> None:
    record(run, key, f"{stage}:{run.attempt}")
    run.step("look", lambda: stage)  # the same name in every stage
    if stage == "remind":
        run.reschedule(delay="1h", input={"key": key, "stage": "again", "flaky": flaky})
    elif stage == "again":
        run.reschedule(
            delay="1d", input={"key": key, "stage": "abandon", "flaky": flaky}
        )
    if flaky and run.attempt == 1:
        raise RuntimeError(f"stage {stage} failed after calling reschedule")


# -- S6: deadlines --------------------------------------------------------------------


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    timeout="300ms",
    retry=Retry(attempts=2, delay="1h", jitter=False),
)
def bounded(run: Run, key: str, ignore: float = 0.0, gate: str = "") -> str:
    """Honours its token by default; with ``ignore`` (seconds) or ``gate`` it runs past
    the deadline regardless, then tries a step, which must be refused."""
    record(run, key, "started")
    if gate:
        hold_at(gate)
    elif ignore:
        time.sleep(ignore)
    else:
        run.cancel_token.wait(10)
        record(run, key, f"cancelled:{run.cancel_token.reason}")
        run.cancel_token.raise_if_cancelled()
    try:
        run.step("late", lambda: "written")
    except JobAborted:
        record(run, key, "late-step-refused")
    else:
        record(run, key, "late-step-written")
    return "finished anyway"


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    step_timeout="300ms",
    retry=Retry(attempts=2, delay="1h", jitter=False),
)
def slow_step(run: Run, key: str) -> None:
    def slow(token) -> str:
        token.wait(10)
        record(run, key, f"step-saw:{token.reason}")
        return "too late"

    run.step("fast", lambda: "quick")
    run.step("slow", slow)
    record(run, key, "after")  # never reached


# -- S7: progress ---------------------------------------------------------------------


@job(idempotency_key=by_key, tenant=NO_TENANT)
def counting(run: Run, key: str, n: int) -> None:
    from ultimate_jobs.models import Job

    for index in range(1, n + 1):
        run.progress(index, n, note=f"item {index}")
        seen = Job.objects.get(pk=run.job_id).progress or {}
        record(run, key, f"seen:{seen['done']}")


# -- S9: atomic steps -----------------------------------------------------------------


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def atomic_write(run: Run, key: str, gate: str = "") -> dict[str, str]:
    def write() -> dict[str, str]:
        record(run, key, "written")  # in the step's transaction
        if gate and run.attempt == 1:
            hold_at(gate)  # SIGKILLed here: written, not committed
        return {"written": key}

    result = run.atomic_step("write", write)
    record(run, key, "after")
    return result
