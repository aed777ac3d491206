"""The tokens a remote agent authenticates with on the HTTP MCP endpoint (P9).

A superuser issues a token for a user in the admin and sees it once; only its SHA-256
hash is stored, so a leaked table grants nothing. A token acts as its user, with that
user's permissions, until it is revoked (``revoked_at``); ``last_used_at`` says whether
it is still in use.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class AgentToken(models.Model):
    """One bearer token of the MCP endpoint: a name, its user, the hash of its secret."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200, help_text="what the token is for")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="the user the agent acts as, with that user's permissions",
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, db_default="")
    created_by = models.CharField(max_length=255, blank=True, db_default="")
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "ultimate_jobs_agent_token"
        ordering = ("-id",)
        verbose_name = "agent token"

    def __str__(self) -> str:
        state = " (revoked)" if self.revoked_at is not None else ""
        return f"{self.name} {self.prefix}… for {self.user_id}{state}"
