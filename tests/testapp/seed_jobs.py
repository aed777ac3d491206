"""Jobs of the issue-20 tests (M2 spans, per-run logs, P4 signals); imported by jobs.py
so worker processes see them. Bodies write Record rows the tests read back."""

from __future__ import annotations

from ultimate_jobs import NO_TENANT, Retry, Run, job

from .models import Record


def record(run: Run, key: str, event: str) -> None:
    from .jobs import record as write

    write(run, key, event)


def by_key(p: dict[str, object]) -> str:
    return f"{p['key']}"


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def chatter(
    run: Run, key: str, lines: int = 3, fail_times: int = 0, size: int = 0
) -> str:
    """Write ``lines`` info lines (and one debug line) through run.logger; fail the
    first ``fail_times`` attempts with a logged exception; ``size`` adds one line of
    that many characters."""
    run.logger.debug("debug line %s", run.attempt)
    for index in range(lines):
        run.logger.info("line %s of attempt %s", index, run.attempt)
    if size:
        run.logger.warning("x" * size)
    if run.attempt <= fail_times:
        try:
            raise ValueError(f"attempt {run.attempt} refused")
        except ValueError:
            run.logger.exception("about to fail")
            raise
    record(run, key, "done")
    return key


@job(
    idempotency_key=by_key,
    tenant=lambda p: p.get("tenant", "t0"),
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def traced(
    run: Run,
    key: str,
    fail_times: int = 0,
    child: str = "",
    tenant: str = "t0",
) -> str:
    """Two steps, then fail the first ``fail_times`` attempts; ``child`` enqueues a
    job of that key from the body (its span is a child of this attempt's)."""
    run.step("fetch", lambda: {"rows": 2})
    run.step("store", lambda: "stored")
    if child:
        traced.enqueue(key=child)
    if run.attempt <= fail_times:
        raise RuntimeError(f"traced attempt {run.attempt} failed")
    return key


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def refuses(run: Run, key: str) -> None:
    """Fail at once, dead-lettered on its only attempt."""
    raise RuntimeError("refused for good")


__all__ = ["Record", "chatter", "refuses", "traced"]
