"""Agent tokens in the admin (P9): a superuser issues and revokes them.

Adding a token names it and the user the agent acts as; the token is shown once, in
the message after saving (only its hash is stored). *Revoke* stops it at once. Only
superusers see this page: a token hands out a user's permissions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from ultimate_jobs.admin.guard import InputGuard
from ultimate_jobs.agents import tokens
from ultimate_jobs.models import AgentToken

if TYPE_CHECKING:
    TokenModelAdmin = admin.ModelAdmin[AgentToken]
else:  # ModelAdmin is generic only to the type checker
    TokenModelAdmin = admin.ModelAdmin


@admin.register(AgentToken)
class AgentTokenAdmin(InputGuard, TokenModelAdmin):
    list_display = (
        "name",
        "user",
        "prefix",
        "created_by",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ("revoked_at",)
    fields = ("name", "user")
    actions = ("revoke",)

    def _superuser(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and self._superuser(request)  # the list's actions only

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoke instead: the row says who issued it and when

    def save_model(
        self,
        request: HttpRequest,
        obj: AgentToken,
        form: Any,
        change: bool,  # noqa: FBT001 - Django's signature
    ) -> None:
        row, token = tokens.issue(obj.user, obj.name, by=request.user.get_username())
        obj.pk = row.pk
        messages.warning(
            request,
            f"Token for {row.user} (shown once, copy it now): {token}",
        )

    @admin.action(description="Revoke (stop the token at once)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        revoked = sum(tokens.revoke(row) for row in queryset)
        self.message_user(request, f"{revoked} token(s) revoked.")
