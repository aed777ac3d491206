"""What the jobs list (admin/jobs.py) and the archive list (admin/archive.py) share:
keyset pages newest first, the one search, and the columns a job shows in either
table, so the two lists cannot drift apart (Q2: a job reads the same before and after
it moved).

Each list keeps what is its own: its filters, its id column (the archive's links to the
job's page), and the columns only live jobs have (waited, ran) or only finished ones do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ultimate_jobs.admin import cells, job_list
from ultimate_jobs.models import Job, JobArchive

if TYPE_CHECKING:  # the type checker sees the ModelAdmin the mixin is placed before
    Base = admin.ModelAdmin[Any]
else:
    Base = object


# The first columns of both lists, and the filters both offer first.
COLUMNS = ("job_id", "job_name", "queue_name", "state", "attempts", "tenant", "created")
FILTERS = (
    job_list.DatabaseFilter,  # Q1: every alias keeps its own jobs and archive
    job_list.StateFilter,
    job_list.QueueFilter,
    job_list.NameFilter,
    job_list.TenantFilter,
)


class JobColumns(Base):
    """A mixin for a ModelAdmin over jobs, placed before ``admin.ModelAdmin``."""

    # Searched by admin/job_list.search (full id, id:<hex prefix>, key prefix, tenant,
    # name); listed so the admin draws its search box.
    search_fields = ("=id",)
    search_help_text = (
        "A full id, id:<first hex digits>, an idempotency key (or its beginning), "
        "a tenant, or a job name."
    )
    sortable_by = ()  # keyset pages: newest first, always
    show_full_result_count = False
    list_per_page = 100
    ordering = ("-id",)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> Any:
        return job_list.KeysetChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        return job_list.search(queryset, search_term), False

    @admin.display(description="name")
    def job_name(self, row: Job | JobArchive) -> str:
        return cells.cut(row.name)

    @admin.display(description="queue")
    def queue_name(self, row: Job | JobArchive) -> str:
        return cells.cut(row.queue)

    @admin.display(description="tenant")
    def tenant(self, row: Job | JobArchive) -> str:
        return cells.cut(row.tenant_id)

    @admin.display(description="created")
    def created(self, row: Job | JobArchive) -> str:
        return job_list.when(row.created_at)

    @admin.display(description="attempts")
    def attempts(self, row: Job | JobArchive) -> str:
        return f"{row.attempt}/{row.max_attempts}"
