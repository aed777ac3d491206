"""Jobs whose secrets reach derived fields (issue 27, B5): the idempotency key, the
error, the logs, a step's output and the span, in plain and encoded forms."""

from __future__ import annotations

import base64
import urllib.parse

from ultimate_jobs import NO_TENANT, Retry, Run, job


def encodings(secret: str) -> str:
    """The secret as a careless message would print it: upper-cased, URL-encoded and
    base64-encoded."""
    encoded = base64.b64encode(secret.encode()).decode()
    return f"{secret.upper()} {urllib.parse.quote(secret, safe='')} {encoded}"


@job(
    idempotency_key=lambda p: f"reset:{p['code']}",
    tenant=NO_TENANT,
    redact=("code",),  # not a REDACT pattern: only the declaration hides it
    retry=Retry(attempts=1),
)
def reset_password(run: Run, user: str, code: str) -> None:
    """Fails quoting the code in every form; logs it and keeps it in a step."""
    run.logger.info("resetting %s with %s", user, encodings(code))
    run.step("check", lambda: {"user": user, "echo": f"code={code}"})
    raise RuntimeError(f"code {code} refused ({encodings(code)})")
