"""The admin's list of jobs in the archive (Q2): finished jobs the scheduler leader moved
out of the hot table (maintenance/archive.py).

A list only, keyset-paged like the jobs list (the table holds every day of the archive:
no count, no offset) with the same filters and search. Each row links to the job's
own page, which reads the job from either table (admin/jobs.py, get_object), so a
job shows the same page, buttons included, before and after it moved; viewing it
needs the permission to view jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from ultimate_jobs.admin import cells, job_columns, job_list
from ultimate_jobs.admin.job_columns import JobColumns
from ultimate_jobs.admin.permissions import ReadOnly
from ultimate_jobs.models import JobArchive

if TYPE_CHECKING:
    ArchiveModelAdmin = admin.ModelAdmin[JobArchive]
else:  # ModelAdmin is generic only to the type checker
    ArchiveModelAdmin = admin.ModelAdmin


@admin.register(JobArchive)
class JobArchiveAdmin(ReadOnly, JobColumns, ArchiveModelAdmin):
    list_display = (*job_columns.COLUMNS, "finished")
    list_display_links = None
    list_filter = (
        *job_columns.FILTERS,
        job_list.CreatedFromFilter,
        job_list.CreatedToFilter,
        job_list.KeyFilter,
    )
    # Search, paging and the shared columns: admin/job_columns.py.
    actions = None
    change_list_template = "admin/ultimate_jobs/job/change_list.html"

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """The jobs' own permission: the archive is where finished jobs live."""
        return request.user.has_perm("ultimate_jobs.view_job")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """A job has one page, whichever table holds it."""
        return HttpResponseRedirect(
            reverse("admin:ultimate_jobs_job_change", args=[object_id])
        )

    @admin.display(description="id")
    def job_id(self, row: JobArchive) -> str:
        page = reverse("admin:ultimate_jobs_job_change", args=[row.pk])
        return format_html('<a href="{}">{}</a>', page, cells.short_id(row.pk))

    @admin.display(description="finished")
    def finished(self, row: JobArchive) -> str:
        return job_list.when(row.finished_at)
