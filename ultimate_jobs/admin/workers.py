"""The admin's workers page (W8, issue 15): live or stale, the queues and slots each
serves, what each runs now (linked), started and last heartbeat, and a Drain button.

A live worker cannot be deleted here (its row is its registration: it would come back
at the next heartbeat, and the page would have lied); a stale one can. *Drain* asks a
live worker to stop claiming, finish what it runs and exit; it honours the request at
its next heartbeat (``api.drain_worker``). Both need ``change_job``; the request
records who asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from ultimate_jobs import api
from ultimate_jobs.admin.guard import InputGuard
from ultimate_jobs.admin.job_list import DatabaseFilter
from ultimate_jobs.models import Worker

if TYPE_CHECKING:
    WorkerModelAdmin = admin.ModelAdmin[Worker]
else:  # ModelAdmin is generic only to the type checker
    WorkerModelAdmin = admin.ModelAdmin


def is_live(worker: Worker) -> bool:
    return worker.expires_at > timezone.now()


@admin.register(Worker)
class WorkerAdmin(InputGuard, WorkerModelAdmin):
    list_display = (
        "id",
        "status",
        "host",
        "pid",
        "served",
        "slots",
        "in_flight_count",
        "abandoned",
        "started_at",
        "heartbeat_at",
    )
    readonly_fields = (
        "id",
        "status",
        "host",
        "pid",
        "served",
        "slots",
        "running_jobs",
        "abandoned",
        "started_at",
        "heartbeat_at",
        "expires_at",
        "drain_requested_at",
        "drain_requested_by",
    )
    fields = readonly_fields
    actions = ("drain_workers",)
    list_filter = (DatabaseFilter,)  # Q1: every alias keeps its own registry
    show_full_result_count = False

    @admin.display(description="status")
    def status(self, worker: Worker) -> str:
        if not is_live(worker):
            return "stale (no heartbeat within a lease)"
        if worker.drain_requested_at is not None:
            return f"live, draining (asked by {worker.drain_requested_by or '?'})"
        return "live"

    @admin.display(description="queues")
    def served(self, worker: Worker) -> str:
        return ", ".join(worker.queues) or "—"

    @admin.display(description="in flight")
    def in_flight_count(self, worker: Worker) -> int:
        return len(worker.in_flight or [])

    @admin.display(description="in-flight jobs")
    def running_jobs(self, worker: Worker) -> str:
        """The jobs it ran at its last heartbeat, each linked to its page."""
        ids = list(worker.in_flight or [])
        if not ids:
            return "— (none at its last heartbeat)"
        return format_html_join(
            mark_safe("<br>"),
            '<a href="{}"><code>{}</code></a>',
            (
                (reverse("admin:ultimate_jobs_job_change", args=[job_id]), job_id)
                for job_id in ids
            ),
        )

    @admin.action(
        description="Drain (finish what runs, then exit)", permissions=["operate"]
    )
    def drain_workers(self, request: HttpRequest, queryset: QuerySet[Worker]) -> None:
        by = f"{request.user.get_username()} (admin)"
        for worker in queryset[:100]:
            if api.drain_worker(worker.id, by=by):
                messages.success(
                    request,
                    f"Worker {worker.id}: drain requested; it stops claiming at its "
                    "next heartbeat and exits when its jobs end.",
                )
            else:
                messages.warning(
                    request,
                    f"Worker {worker.id} is not live (no heartbeat within a lease); "
                    "there is nothing to drain.",
                )

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ultimate_jobs.change_job")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and is_live(obj):
            return False  # its next heartbeat would bring it back
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Worker]) -> None:
        """Bulk delete removes stale rows only, and says which live ones it kept."""
        live = [w.id for w in queryset if is_live(w)]
        queryset.filter(expires_at__lte=timezone.now()).delete()
        for worker_id in live:
            messages.warning(
                request,
                f"Worker {worker_id} is live; it was not deleted (drain it instead).",
            )
