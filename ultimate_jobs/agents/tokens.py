"""Bearer tokens of the HTTP MCP endpoint (P9): issue, check, revoke.

A token is ``ujt_`` and 43 URL-safe characters; only its SHA-256 hash is stored
(``AgentToken``), so it is shown once, when it is issued. A revoked token, or one of
an inactive user, authenticates nobody.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.utils import timezone

from ultimate_jobs.ground.bounds import check_text
from ultimate_jobs.models import AgentToken

PREFIX = "ujt_"
MAX_TOKEN_LENGTH = 200


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(user: Any, name: str, *, by: str = "") -> tuple[AgentToken, str]:
    """A new token acting as ``user``: the stored row and the token itself (shown
    once; it cannot be read back)."""
    name = check_text(name, field="name", max_length=200)
    token = PREFIX + secrets.token_urlsafe(32)
    row = AgentToken.objects.create(
        name=name,
        user=user,
        token_hash=digest(token),
        prefix=token[:12],
        created_by=by[:255],
    )
    return row, token


def user_of(token: str) -> Any | None:
    """The active user a live token acts as, or None (unknown, revoked, inactive)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None
    row = (
        AgentToken.objects.select_related("user")
        .filter(token_hash=digest(token), revoked_at__isnull=True)
        .first()
    )
    if row is None or not row.user.is_active:
        return None
    AgentToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user


def revoke(row: AgentToken) -> bool:
    """Revoke one token at once; answers whether it was live."""
    return bool(
        AgentToken.objects.filter(pk=row.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )
