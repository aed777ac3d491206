"""Jobs of the fan-out / fan-in tests (S10, S11); imported by jobs.py so workers see them.

``square`` is the child: it keeps its result (store_result=True), fails for good when
asked, and can hold at a gate file (durable_jobs.hold_at). ``fan_in`` spawns
``count`` children on ``queue``, waits for them, and keeps the outcomes' summary as its
result; ``spawned`` Records say how often each spawn's code ran.
"""

from __future__ import annotations

from typing import Any

from ultimate_jobs import NO_TENANT, Retry, Run, job

from .durable_jobs import hold_at, record


@job(
    idempotency_key=lambda p: f"square:{p['key']}:{p['n']}",
    tenant=NO_TENANT,
    retry=Retry(attempts=2, delay="1s", jitter=False),
    store_result=True,
)
def square(run: Run, key: str, n: int, fail: bool = False, gate: str = "") -> int:
    if gate:
        hold_at(gate)
    if fail:
        raise ValueError(f"child {n} fails")
    return n * n


def fan(
    run: Run,
    key: str,
    count: int,
    queue: str = "default",
    fail: list[int] | None = None,
    timeout: float | None = None,
    gate: str = "",
    child_gate: str = "",
    brief: bool = False,
    batch: int = 0,
) -> dict[str, Any]:
    def child(n: int) -> dict[str, Any]:
        return {
            "key": key,
            "n": n,
            "fail": n in (fail or []),
            "gate": child_gate if n == 0 else "",
        }

    children = []
    if batch:  # run.spawn_many: one transaction per `batch` children
        for first in range(0, count, batch):
            chunk = [child(n) for n in range(first, min(first + batch, count))]
            children += run.spawn_many(
                f"chunk:{first}", square.using(queue=queue), chunk
            )
    else:
        for n in range(count):
            children.append(
                run.spawn(f"child:{n}", square.using(queue=queue), **child(n))
            )
    if gate:
        hold_at(gate)  # spawned, not yet waiting: the test kills the worker here
    outcomes = run.wait_for_jobs("children", children, timeout=timeout)
    record(run, key, "fanned-in")
    if brief:  # a result of 10,000 ids would pass MAX_RESULT_BYTES
        states: dict[str, int] = {}
        for o in outcomes:
            states[o.state] = states.get(o.state, 0) + 1
        return {"states": states, "sum": sum(o.result or 0 for o in outcomes)}
    return {
        "ids": [str(o.id) for o in outcomes],
        "states": [o.state for o in outcomes],
        "sum": sum(o.result for o in outcomes if o.state == "done"),
        "errors": [o.error for o in outcomes if o.error],
    }


def declare_fan(name: str, event_poll: float) -> Any:
    return job(
        name=f"testapp.{name}",
        idempotency_key=lambda p: f"{name}:{p['key']}",
        tenant=NO_TENANT,
        retry=Retry(attempts=3, delay="1s", jitter=False),
        store_result=True,
        event_poll=event_poll,
    )(fan)


# A wait re-checks at its event_poll: 60 s here, so what comes sooner is the wake.
fan_in = declare_fan("fan_in", event_poll=60.0)
# Re-checks at every second: a test that only needs the outcomes, however they come.
fan_in_polling = declare_fan("fan_in_polling", event_poll=1.0)
# Re-checks every 10 minutes: a parent done sooner was woken (children on another
# alias: by the settling worker, runtime/parents.py).
fan_in_far = declare_fan("fan_in_far", event_poll=600.0)


# -- tenants and limits: a child is an ordinary job -----------------------------------


@job(
    idempotency_key=lambda p: f"shop-child:{p['n']}",
    tenant=lambda p: p.get("shop"),  # None: the parent's tenant (S10)
    store_result=True,
)
def shop_child(run: Run, n: int, shop: str | None = None) -> str | None:
    from ultimate_jobs.ground.context import current_tenant

    return current_tenant()


@job(idempotency_key=lambda p: f"shop-parent:{p['shop']}", tenant=lambda p: p["shop"])
def shop_parent(run: Run, shop: str, accounts: list[str]) -> None:
    from .jobs import per_account

    run.spawn("own", shop_child, n=0)
    run.spawn("other", shop_child, n=1, shop="elsewhere")
    for index, account in enumerate(accounts):
        run.spawn(
            f"account:{index}", per_account, key=f"{shop}:{index}", account=account
        )
