"""A job only the "next deploy" declares: worker processes started with
UJ_TEST_NEXT_DEPLOY=1 import it, the others (and the test process) do not, so a
rolling deploy's two registries run side by side (W2, issue 16 item 7)."""

from __future__ import annotations

from ultimate_jobs import Run, job

from .jobs import by_key, record


@job(
    name="testapp.next_deploy",
    idempotency_key=by_key,
    tenant=lambda p: p.get("tenant"),
)
def next_deploy(run: Run, key: str, tenant: str | None = None) -> str:
    record(run, key, "ran-next-deploy")
    return key
