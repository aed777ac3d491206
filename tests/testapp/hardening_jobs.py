"""Jobs of the hardening tests (issue 14: B4-B7): bodies that crash in every way,
read tenant-scoped rows, carry secrets, or ignore their timeout."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from ultimate_jobs import NO_TENANT, Retry, Run, cross_tenant, job

from .models import Document, Record


def by_key(p: dict[str, Any]) -> str:
    return f"{p['key']}"


def _recurse(depth: int) -> int:
    return _recurse(depth + 1) + 1


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def crashes(run: Run, key: str, how: str) -> None:
    """Crash the way ``how`` says: the attempt must record that very error."""
    if how == "exit":
        sys.exit(3)
    if how == "recursion":
        _recurse(0)
    if how == "memory":
        raise MemoryError("simulated: could not allocate 8 GiB")
    if how == "generator-exit":
        raise GeneratorExit("closed")


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def takes_anything(run: Run, key: str, data: Any = None) -> None:
    """Accepts any JSON: the bounds, not the annotation, refuse a bad value."""
    Record.objects.create(key=key, event="ran")


@job(
    idempotency_key=lambda p: p["key"] + ("\x00" if p.get("nul_key") else ""),
    tenant=lambda p: p["tenant"] + ("\x00" if p.get("nul_tenant") else ""),
)
def keyed(
    run: Run, key: str, tenant: str, nul_key: bool = False, nul_tenant: bool = False
) -> None:
    """Its key and tenant functions answer text with a NUL when asked to."""


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def sleeps_past_the_horizon(run: Run, key: str) -> None:
    run.sleep("3650000d")


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def reschedules_past_the_horizon(run: Run, key: str) -> None:
    run.reschedule(run_at=datetime.now(UTC) + timedelta(days=365 * 200))


seen_secrets: list[str] = []


@job(
    idempotency_key=lambda p: f"signup:{p['email']}",
    tenant=lambda p: p["org"],
    redact=("card.number",),
    retry=Retry(attempts=1),
)
def signup(
    run: Run,
    email: str,
    org: str,
    password: str,
    card: dict[str, Any],
    api_token: str,
) -> None:
    """Carries secrets: a declared path (card.number) and REDACT keys (password,
    api_token). The body gets the real values; every operator surface must not."""
    seen_secrets.append(password)
    seen_secrets.append(card["number"])
    run.logger.info("signing up %s with %s", email, password)
    run.logger.warning("card %s", card["number"], extra={"token_used": api_token})
    run.progress(1, 2, note=f"charging {card['number']}")
    run.step("remember", lambda: {"email": email, "api_token": api_token})
    raise RuntimeError(f"the card {card['number']} was refused for {password!r}")


def by_tenant(p: dict[str, Any]) -> Any:
    return p.get("tenant") or NO_TENANT


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def reads_documents(run: Run, key: str, tenant: str) -> list[str]:
    """A body under a tenant: the guarded manager answers that tenant's rows only."""
    titles = sorted(Document.objects.values_list("title", flat=True))
    Record.objects.create(key=key, event="saw:" + ",".join(titles)[:40])
    return titles


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def reads_documents_without_tenant(run: Run, key: str, cross: bool = False) -> None:
    """A body with no tenant: reading tenant rows needs cross_tenant(reason=...)."""
    if cross:
        with cross_tenant(reason="nightly count of every tenant's documents"):
            count = Document.objects.count()
        Record.objects.create(key=key, event=f"counted:{count}")
        return
    Record.objects.create(key=key, event=f"counted:{Document.objects.count()}")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    timeout="1s",
    retry=Retry(attempts=1),
)
def ignores_timeout(run: Run, key: str, seconds: float = 4.0) -> None:
    """Sleeps past its timeout without looking at its cancel token."""
    time.sleep(seconds)


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def writes_documents(run: Run, key: str, tenant: str) -> None:
    """Writes through the guarded manager: a create takes the run's tenant, another
    tenant's is refused, an update and a delete touch the run's tenant only."""
    from ultimate_jobs import JobTenantMismatch

    Document.objects.create(title="made-in-job")
    try:
        Document.objects.create(title="smuggled", tenant_id="globex")
    except JobTenantMismatch as exc:
        Record.objects.create(key=key, event=exc.code)
    Document.objects.filter(title__startswith="a").update(title="renamed")
    Document.objects.filter(title="doomed").delete()


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def writes_a_nul(run: Run, key: str, where: str) -> None:
    """A body handing PostgreSQL a NUL: in a step's result or a progress note."""
    if where == "step":
        run.step("nul", lambda: {"text": "a\x00b"})
    if where == "progress":
        run.progress(1, 2, note="half\x00way")


@job(
    idempotency_key=by_key,
    tenant=NO_TENANT,
    timeout="1s",
    retry=Retry(attempts=1),
)
def honours_timeout(run: Run, key: str) -> None:
    """Runs until its deadline sets its token, then stops at once."""
    while not run.cancel_token.wait(0.05):
        pass
    run.cancel_token.raise_if_cancelled()
