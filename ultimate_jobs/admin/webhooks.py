"""Admin pages of the database webhook ledger (F5): endpoints with their failure streak
and disabled verdict, and the delivery attempts.

Re-enabling a disabled endpoint is a person's act, and this is where it happens: the
"Re-enable" action needs the change permission, calls ``DatabaseWebhookLedger.enable``
with the user's name and is recorded in the admin log. Nothing else is editable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.db.models import QuerySet
from django.http import HttpRequest

from ultimate_jobs.admin.permissions import NoAddOrDelete
from ultimate_jobs.models.webhooks import WebhookDelivery, WebhookEndpointState
from ultimate_jobs.webhooks.ledger import DatabaseWebhookLedger

if TYPE_CHECKING:
    EndpointModelAdmin = admin.ModelAdmin[WebhookEndpointState]
    DeliveryModelAdmin = admin.ModelAdmin[WebhookDelivery]
else:  # ModelAdmin is generic only to the type checker
    EndpointModelAdmin = DeliveryModelAdmin = admin.ModelAdmin


@admin.register(WebhookEndpointState)
class WebhookEndpointStateAdmin(NoAddOrDelete, EndpointModelAdmin):
    list_display = (
        "endpoint_id",
        "consecutive_failures",
        "disabled_at",
        "disabled_reason",
        "enabled_at",
        "enabled_by",
        "last_attempt_at",
    )
    list_filter = (("disabled_at", admin.EmptyFieldListFilter),)
    search_fields = ("=endpoint_id",)
    actions = ("enable_endpoints",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The rows are read-only; the action needs the change permission itself.
        return obj is None and request.user.has_perm(
            "ultimate_jobs.change_webhookendpointstate"
        )

    @admin.action(description="Re-enable", permissions=["change"])
    def enable_endpoints(
        self, request: HttpRequest, queryset: QuerySet[WebhookEndpointState]
    ) -> None:
        ledger = DatabaseWebhookLedger(using=queryset.db)
        by = request.user.get_username()
        enabled = 0
        for row in queryset.filter(disabled_at__isnull=False)[:1000]:
            ledger.enable(row.endpoint_id, by=by)
            LogEntry.objects.log_actions(
                user_id=cast(int, request.user.pk),
                queryset=[row],
                action_flag=CHANGE,
                change_message="re-enabled via admin",
                single_object=True,
            )
            enabled += 1
        skipped = queryset.count() - enabled
        said = f"Webhook endpoints: {enabled} re-enabled"
        if skipped:
            said += f"; {skipped} selected were not disabled, nothing to do"
        messages.success(request, said + ".")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(NoAddOrDelete, DeliveryModelAdmin):
    list_display = (
        "attempted_at",
        "endpoint_id",
        "event_id",
        "topic",
        "ok",
        "status",
        "error",
        "attempt",
        "job_id",
    )
    list_filter = ("ok", "topic")
    search_fields = ("=endpoint_id", "=event_id", "=job_id")
    show_full_result_count = False
    list_per_page = 100

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
