"""The Django admin as the operator surface (P1, P2): read-only lists, audited actions.

Lists never change rows directly: every action calls ``ultimate_jobs.api`` (the verbs the
command line uses too), needs the matching permission, and is recorded in Django's
admin log (who, when).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

import ultimate_jobs.admin.scheduling  # noqa: F401 - registers the scheduler's pages
import ultimate_jobs.admin.webhooks as _webhook_admin  # noqa: F401 - registers its pages
from ultimate_jobs import api
from ultimate_jobs.admin import (
    cells,
    charts,
    job_columns,
    job_details,
    job_family,
    job_list,
    job_page,
)
from ultimate_jobs.admin.guard import InputGuard
from ultimate_jobs.admin.job_columns import JobColumns
from ultimate_jobs.admin.permissions import ReadOnly
from ultimate_jobs.admin.refusals import bulk_summary, refused
from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.models import (
    BackfillLedger,
    Job,
    JobArchive,
    JobCounter,
    QueuePause,
)

BULK_LIMIT = 1000

if TYPE_CHECKING:
    BackfillLedgerModelAdmin = admin.ModelAdmin[BackfillLedger]
    JobModelAdmin = admin.ModelAdmin[Job]
    JobCounterModelAdmin = admin.ModelAdmin[JobCounter]
    QueuePauseModelAdmin = admin.ModelAdmin[QueuePause]
else:  # ModelAdmin is generic only to the type checker
    JobModelAdmin = QueuePauseModelAdmin = admin.ModelAdmin
    JobCounterModelAdmin = BackfillLedgerModelAdmin = admin.ModelAdmin


_audit = job_page.audit


def _apply(request: HttpRequest, queryset: QuerySet[Job], verb: str, call: Any) -> None:
    """Apply one verb to the selected jobs, recording the admin user as its actor."""
    done, refusals = 0, []
    actor = api.operator_of(request.user, source="admin")
    for job in _selected(request, queryset):
        try:
            call(job.pk, actor)
        except JobsError as exc:
            refusals.append(refused(job.pk, exc))
            continue
        done += 1
        _audit(request, job, f"{verb} via admin")
    remaining = max(queryset.count() - BULK_LIMIT, 0)
    messages.info(
        request, bulk_summary(verb, done, len(refusals), remaining, BULK_LIMIT)
    )
    for line in refusals[:10]:
        messages.warning(request, line)


def _selected(request: HttpRequest, queryset: QuerySet[Job]) -> list[Any]:
    """The jobs an action acts on: the selected rows of either table (a list filtered
    to a finished state shows the archive's rows too, Q2), at most BULK_LIMIT."""
    rows: list[Any] = list(queryset[:BULK_LIMIT])
    if request.POST.get("select_across") == "1":
        return rows
    ids = set()
    for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)[:BULK_LIMIT]:
        with contextlib.suppress(ValueError):
            ids.add(uuid.UUID(value))
    ids -= {row.pk for row in rows}
    if ids:
        archive = JobArchive.objects.using(queryset.db).filter(pk__in=ids)
        rows += list(archive[: BULK_LIMIT - len(rows)])
    return rows


@admin.register(Job)
class JobAdmin(ReadOnly, JobColumns, JobModelAdmin):
    # Rows change only through the audited actions below (ReadOnly: no edit form).
    list_display = (*job_columns.COLUMNS, "wait", "run_time")
    list_filter = (
        *job_columns.FILTERS,
        ("created_at", admin.DateFieldListFilter),
        job_list.CreatedFromFilter,
        job_list.CreatedToFilter,
        job_list.FiredByFilter,
        job_list.KeyFilter,
        job_list.ParentFilter,
    )
    # Search, keyset paging and the columns it shares with the archive list:
    # admin/job_columns.py.
    actions = ("retry_jobs", "cancel_jobs", "promote_jobs", "remove_jobs")
    readonly_fields = (
        "id",
        "run_id",
        "name",
        "queue",
        "priority",
        "state",
        "pretty_input",
        "tenant_id",
        "key_link",
        "attempt",
        "max_attempts",
        "run_at",
        "created_at",
        "started_at",
        "finished_at",
        "worker_id",
        "lease_expires_at",
        "error_code",
        "stop_reason",
        "pretty_error",
        "attempt_history",
        "pretty_progress",
        "pretty_result",
        "step_trace",
        "family",
        "logs",
        "backfill_pass",
        "shown_correlation_id",
        "enqueued_by_name",
        "operator_actions",
    )
    exclude = (
        "input",
        "last_error",
        "lease_owner",
        "progress",
        "result",
        "idempotency_key",
        "enqueued_by",
        "correlation_id",
        "redact",
        "shown_key",
    )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The live jobs; finished ones move to the archive after ARCHIVE_AFTER, so the
        list says where they went once there are any (issue 30)."""
        extra = {
            "archived_any": JobArchive.objects.using(get_settings().DATABASE)
            .order_by()
            .exists(),
            "archive_after": charts.age(get_settings().ARCHIVE_AFTER),
            "archive_url": reverse("admin:ultimate_jobs_jobarchive_changelist"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The list, read now: a row Python cannot read is left out and named (B4)."""
        changelist = super().get_changelist_instance(request)
        page = changelist.result_list
        list(page)
        for pk, error in getattr(page, "unreadable", [])[:10]:
            messages.warning(
                request, f"Job {pk}: X_ROW_UNREADABLE, left out of this list ({error})"
            )
        return changelist

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """``result`` only for a job whose declaration keeps it (P8)."""
        fields = list(super().get_readonly_fields(request, obj))
        if obj is None or not _stores_result(obj):
            fields.remove("pretty_result")
        return fields

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """A summary, then attempts and steps above the fold (job_page.SECTIONS)."""
        return job_page.fieldsets(list(self.get_readonly_fields(request, obj)))

    def get_urls(self) -> list[Any]:
        from django.urls import path

        act = path(
            "<path:object_id>/act/",
            self.admin_site.admin_view(self.act_view),
            name="ultimate_jobs_job_act",
        )
        return [act, *super().get_urls()]

    def act_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A button of the job's page (job_page.act): permission-checked, audited."""
        job = self.get_object(request, object_id)
        if job is None or not self.has_view_permission(request, job):
            raise PermissionDenied("no such job, or you may not see it")
        return job_page.act(
            request,
            job,
            operate=self.has_operate_permission(request),
            remove=self.has_remove_permission(request),
        )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        job = self.get_object(request, object_id)
        if job is not None:
            context["job_actions"] = job_page.offered(
                job,
                operate=self.has_operate_permission(request),
                remove=self.has_remove_permission(request),
            )
            context["job_steps"] = job_page.current_steps(job)
            context["act_url"] = reverse("admin:ultimate_jobs_job_act", args=[job.pk])
        return super().change_view(request, object_id, form_url, context)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        """The job by id wherever the locator finds it (Q1, Q2): the page shows a job
        that moved to the archive exactly as before it moved."""
        if from_field is not None:
            return super().get_object(request, object_id, from_field)
        return job_page.located(object_id)

    def get_list_display(self, request: HttpRequest) -> tuple[Any, ...]:
        """Q1: a database column when queues live on several aliases."""
        shown = tuple(super().get_list_display(request))
        if len(get_settings().aliases) < 2:
            return shown
        at = shown.index("queue_name") + 1
        return (*shown[:at], "database", *shown[at:])

    @admin.display(description="database")
    def database(self, job: Job) -> str:
        return job._state.db or get_settings().DATABASE

    @admin.display(description="id")
    def job_id(self, job: Job) -> str:
        return cells.short_id(job.pk)

    @admin.display(description="waited")
    def wait(self, job: Job) -> str:
        return job_list.span(job_list.waited(job))

    @admin.display(description="ran")
    def run_time(self, job: Job) -> str:
        return job_list.span(job_list.took(job))

    @admin.display(description="attempt history")
    def attempt_history(self, job: Job) -> str:
        return job_page.attempt_table(job)

    @admin.display(description="steps")
    def step_trace(self, job: Job) -> str:
        return job_page.step_table(job)

    # Detail fields rendered by admin/job_details.py (functions of the job alone).
    pretty_input = staticmethod(job_details.pretty_input)
    pretty_error = staticmethod(job_details.pretty_error)
    shown_correlation_id = staticmethod(job_details.shown_correlation_id)
    pretty_progress = staticmethod(job_details.pretty_progress)
    operator_actions = staticmethod(job_details.operator_actions)
    pretty_result = staticmethod(job_details.pretty_result)
    key_link = staticmethod(job_details.same_key_link)
    logs = staticmethod(job_details.run_logs)
    backfill_pass = staticmethod(job_details.backfill_pass)
    enqueued_by_name = staticmethod(job_details.enqueued_by_name)

    @admin.display(description="parent and children")
    def family(self, job: Job) -> str:
        return job_family.family(job)

    @admin.action(description="Retry (requeue finished jobs)", permissions=["operate"])
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        _apply(request, queryset, "retry", lambda pk, who: api.retry(pk, actor=who))

    @admin.action(description="Cancel", permissions=["operate"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        _apply(
            request,
            queryset,
            "cancel",
            lambda pk, who: api.cancel(pk, f"cancelled by {request.user}", actor=who),
        )

    @admin.action(description="Run now (promote)", permissions=["operate"])
    def promote_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        _apply(request, queryset, "promote", lambda pk, who: api.promote(pk, actor=who))

    @admin.action(description="Remove", permissions=["remove"])
    def remove_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        _apply(request, queryset, "remove", lambda pk, who: api.remove(pk, actor=who))

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ultimate_jobs.change_job")

    def has_remove_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ultimate_jobs.delete_job")


def _stores_result(job: Job) -> bool:
    """Whether the job's declaration keeps its result (P8); unknown names do not."""
    return job.name in registry and registry.get(job.name).definition.store_result


@admin.register(QueuePause)
class QueuePauseAdmin(InputGuard, QueuePauseModelAdmin):
    """The paused queues. A queue is paused from the dashboard's buttons (who is
    recorded, the name checked); deleting a row here resumes the queue through
    ``api.resume_queue``, so its workers are woken (N1) as from every other surface."""

    list_display = ("queue", "paused_at", "paused_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: QueuePause) -> None:
        api.resume_queue(obj.queue)

    def delete_queryset(
        self, request: HttpRequest, queryset: QuerySet[QueuePause]
    ) -> None:
        for pause in queryset:
            api.resume_queue(pause.queue)


@admin.register(JobCounter)
class JobCounterAdmin(ReadOnly, JobCounterModelAdmin):
    """Per-job counts by time bucket (P5): filter by job and tier, newest first."""

    list_display = (
        "name",
        "bucket",
        "tier",
        "done",
        "retried",
        "failed",
        "dead",
        "mean",
    )
    list_filter = ("tier", "name")
    date_hierarchy = "bucket"
    show_full_result_count = False

    @admin.display(description="mean duration (s)")
    def mean(self, counter: JobCounter) -> str:
        ran = counter.done + counter.retried + counter.failed + counter.dead
        return f"{counter.duration / ran:.3f}" if ran else "-"


@admin.register(BackfillLedger)
class BackfillLedgerAdmin(ReadOnly, BackfillLedgerModelAdmin):
    """The backfill ledger (F1, P1): one row per pass, read-only. Passes are started
    with ``manage.py db_backfill NAME --write``, never from here."""

    list_display = (
        "id",
        "name",
        "status",
        "rows",
        "batches",
        "forced",
        "app_version",
        "started_at",
        "completed_at",
        "job_id",
    )
    list_filter = ("status", "name")
    search_fields = ("=name", "=job_id")
    show_full_result_count = False
