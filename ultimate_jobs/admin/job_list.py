"""The jobs list of the admin (P1, issue 15): keyset pages, filters that cost no scan,
a search that says what it looks for, full ids, waits and run times.

- **Pages** are keyset pages on the time-ordered id (H5), newest first: ``?after=<id>``
  answers the older page below an id, ``?before=<id>`` the newer page above one; the
  list reads ``list_per_page + 1`` rows and never counts or skips, so a million-row
  table opens as fast as an empty one.
- **Filters**: state, queue and name offer what this deploy declares (no ``SELECT
  DISTINCT`` over the table), tenant and idempotency key take a value
  (``?tenant=acme``, ``?key=cart-42``), and the created range is
  ``?created_from=…&created_to=…`` (ISO dates or times, naive ones in the current
  time zone; the form above the list) besides the date filter's links.
- **Search** (``?q=``): a full id finds that job; ``id:0193ab`` finds the ids that begin
  with those hex digits (an index range, not a text scan); anything else finds the
  jobs whose idempotency key begins with it, whose tenant is it, or whose name is it
  (``?q=4242`` finds key ``4242`` and tenant ``4242``).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.html import format_html

from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.models import FINISHED_STATES, Job, JobState
from ultimate_jobs.models.jobs import fired_by

CURSORS = ("after", "before")
_HEX = re.compile(r"^[0-9a-f-]{1,36}$")


def parse_cursor(value: str | None) -> uuid.UUID | None:
    """A page cursor (a job id), or None when absent or not an id."""
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


# Columns no list shows and that may be large (an input of 1 MiB per row made a page
# of 100 take 5.6 s and ~200 MB, issue 31): a list reads them never.
DEFERRED = ("input", "result", "progress", "last_error")


def _deferred(model: Any) -> list[str]:
    names = {field.name for field in model._meta.get_fields()}
    return [name for name in DEFERRED if name in names]


class KeysetChangeList(ChangeList):
    """A ChangeList that pages on the id instead of counting and offsetting."""

    def archived(self, request: HttpRequest) -> list[QuerySet[Any]]:
        """The archive's rows under the same filters, when the jobs list is filtered to
        a finished state (Q2: ``?state=dead`` lists every dead job, moved or not, the
        number the dashboard's dead link and the gauge count). None when a filter the
        archive's list does not take is given, or for the archive's own list."""
        from ultimate_jobs.models import JobArchive

        state = request.GET.get("state")
        if self.model is not Job or state not in FINISHED_STATES:
            return []
        archive_admin = self.model_admin.admin_site._registry.get(JobArchive)
        if archive_admin is None:
            return []
        taken = {f.parameter_name for f in archive_admin.list_filter}  # type: ignore[union-attr]
        given = set(request.GET) - {
            "after",
            "before",
            "q",
            "o",
            "p",
            "e",
            "_changelist_filters",
        }
        if not given <= taken:
            return []
        rows = archive_admin.get_changelist_instance(request).queryset
        return [rows]

    def _read(
        self,
        tables: list[QuerySet[Any]],
        unreadable: list[Any],
        *,
        older_than: uuid.UUID | None = None,
        newer_than: uuid.UUID | None = None,
    ) -> list[Any]:
        """Up to ``list_per_page + 1`` rows next to the cursor, from each table, merged
        by id (newest first, or oldest first above ``newer_than``)."""
        limit = self.list_per_page + 1
        found: list[Any] = []
        for table in tables:
            if newer_than is not None:
                read = table.filter(id__gt=newer_than).order_by("id")[:limit]
            elif older_than is not None:
                read = table.order_by("-id").filter(id__lt=older_than)[:limit]
            else:
                read = table.order_by("-id")[:limit]
            found += list(read)
            # Read here, once: admin/jobs.py names the unreadable rows (B4).
            unreadable += getattr(read, "unreadable", [])
        found.sort(key=lambda row: row.pk, reverse=newer_than is None)
        return found[:limit]

    def get_filters_params(self, params: Any = None) -> Any:
        lookup = super().get_filters_params(params)
        for name in CURSORS:
            lookup.pop(name, None)
        return lookup

    def get_results(self, request: HttpRequest) -> None:
        for name in CURSORS:  # filter and search links start from the newest page
            self.params.pop(name, None)
            self.filter_params.pop(name, None)
        per_page = self.list_per_page
        after = parse_cursor(request.GET.get("after"))
        before = parse_cursor(request.GET.get("before"))
        unreadable: list[Any] = []
        tables = [  # issue 31: no list reads a row's input (nor its result)
            t.defer(*_deferred(t.model))
            for t in (self.queryset, *self.archived(request))
        ]
        if before is not None:
            newer = self._read(tables, unreadable, newer_than=before)
            self.has_newer = len(newer) > per_page
            page = list(reversed(newer[:per_page]))
            self.has_older = True
        else:
            older = self._read(tables, unreadable, older_than=after)
            self.has_older = len(older) > per_page
            page = older[:per_page]
            self.has_newer = after is not None
        self.result_list = _Page(page, unreadable)
        self.result_count = len(page)
        self.full_result_count = None
        self.show_full_result_count = False
        self.show_admin_actions = True
        self.can_show_all = False
        self.multi_page = self.has_older or self.has_newer
        self.paginator = Paginator(page, per_page)
        self.newer_url = (
            self.get_query_string({"before": str(page[0].pk)}, remove=["after"])
            if self.has_newer and page
            else ""
        )
        self.older_url = (
            self.get_query_string({"after": str(page[-1].pk)}, remove=["before"])
            if self.has_older and page
            else ""
        )
        self.newest_url = self.get_query_string(remove=list(CURSORS))
        # The range form's values, every key present (the template looks up no
        # missing name: Django logs those lookups with the request's context).
        self.range_values = {
            name: str(self.params.get(name, ""))
            for name in ("tenant", "created_from", "created_to")
        }


class _Page(list[Job]):
    """A page of jobs that keeps the rows its read left out (B4)."""

    def __init__(self, rows: list[Job], unreadable: list[Any]) -> None:
        super().__init__(rows)
        self.unreadable = unreadable


def search(queryset: QuerySet[Job], term: str) -> QuerySet[Job]:
    """The jobs ``term`` names (see the module docstring)."""
    term = term.strip()
    if not term:
        return queryset
    lowered = term.lower()
    if lowered.startswith("id:"):
        prefix = lowered[3:].replace("-", "")
        if not prefix or not _HEX.match(prefix) or len(prefix) > 32:
            return queryset.none()
        low = uuid.UUID(prefix.ljust(32, "0"))
        high = uuid.UUID(prefix.ljust(32, "f"))
        return queryset.filter(id__gte=low, id__lte=high)
    try:
        exact = uuid.UUID(term)
    except ValueError:
        exact = None
    if exact is not None and len(term.replace("-", "")) == 32:
        return queryset.filter(id=exact)
    return queryset.filter(
        key_matches(term, prefix=True) | Q(tenant_id=term) | Q(name=term)
    )


def key_matches(term: str, *, prefix: bool) -> Q:
    """Jobs whose key, as operators see it, is (or starts with) ``term`` (B5): a key
    holding a hidden value is matched by its shown form (``shown_key``) only, so a
    search never finds a job by the hidden part of its key."""
    lookup = "startswith" if prefix else "exact"
    return Q(shown_key__isnull=True, **{f"idempotency_key__{lookup}": term}) | Q(
        **{f"shown_key__{lookup}": term}
    )


class DatabaseFilter(admin.SimpleListFilter):
    """Q1: the jobs of one alias (``?database=jobs_b``), offered when queues live on
    several; without it the list shows DATABASE's jobs."""

    title = "database"
    parameter_name = "database"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        aliases = get_settings().aliases
        return [(alias, alias) for alias in aliases] if len(aliases) > 1 else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        if value not in get_settings().aliases:
            raise IncorrectLookupParameters(f"database: no jobs alias {value!r}")
        return queryset.using(value)


class _ValueFilter(admin.SimpleListFilter):
    """A filter on one exact value given in the URL, listed while it is applied."""

    field = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value)] if value else []

    def has_output(self) -> bool:
        return bool(self.value())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class KeyFilter(_ValueFilter):
    """Jobs of one idempotency key (``?key=report:42``; a job's page links to it), as
    shown (B5: a key holding a hidden value by its shown form)."""

    title = "idempotency key"
    parameter_name = "key"
    field = "idempotency_key"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        return queryset.filter(key_matches(value, prefix=False)) if value else queryset


class ParentFilter(_ValueFilter):
    """The children of one job (``?parent=<id>``, S11; a parent's page links to it)."""

    title = "parent"
    parameter_name = "parent"
    field = "parent_id"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        try:
            parent = uuid.UUID(value)
        except ValueError:
            raise IncorrectLookupParameters(
                f"parent: not a job id: {value!r}"
            ) from None
        return queryset.filter(parent_id=parent)


class TenantFilter(_ValueFilter):
    """Jobs of one tenant (``?tenant=acme``)."""

    title = "tenant"
    parameter_name = "tenant"
    field = "tenant_id"


class FiredByFilter(_ValueFilter):
    """Jobs a task or schedule fired (``?fired_by=task:nightly``): their correlation
    id is ``<kind>:<name>@<occurrence>`` (C7), found through its pattern index."""

    title = "fired by"
    parameter_name = "fired_by"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(fired_by(f"{value}@"))


def parse_instant(value: str) -> datetime:
    """An ISO 8601 date or time; a naive one is read in the current time zone.

    Django's parsers raise ``ValueError`` (or ``OverflowError``) for a well-formed
    but impossible value (``0000-0-0``, ``2026-02-30``, a year past 9999 once made
    aware): that is the operator's typo, refused like a malformed one, never a 500."""
    try:
        moment = parse_datetime(value)
        if moment is None:
            day = parse_date(value)
            if day is None:
                raise IncorrectLookupParameters(f"not a date or time: {value!r}")
            moment = datetime(day.year, day.month, day.day)
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
    except (ValueError, OverflowError) as exc:
        raise IncorrectLookupParameters(f"not a date or time: {value!r}") from exc
    return moment


class CreatedFromFilter(_ValueFilter):
    """Jobs created at or after an instant (``?created_from=2026-12-01``)."""

    title = "created from"
    parameter_name = "created_from"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(created_at__gte=parse_instant(value))


class CreatedToFilter(_ValueFilter):
    """Jobs created before an instant (``?created_to=2026-12-02 18:00``)."""

    title = "created before"
    parameter_name = "created_to"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(created_at__lt=parse_instant(value))


class _DeclaredFilter(admin.SimpleListFilter):
    """Choices from the declarations (and the applied value), never from the table."""

    field = ""

    def choices_from(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = set(self.choices_from())
        if self.value():
            values.add(str(self.value()))
        return [(v, v) for v in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class QueueFilter(_DeclaredFilter):
    title = "queue"
    parameter_name = "queue"
    field = "queue"

    def choices_from(self) -> list[str]:
        return registry.queues()


class NameFilter(_DeclaredFilter):
    title = "name"
    parameter_name = "name"
    field = "name"

    def choices_from(self) -> list[str]:
        return [handle.definition.name for handle in registry]


class StateFilter(_DeclaredFilter):
    title = "state"
    parameter_name = "state"
    field = "state"

    def choices_from(self) -> list[str]:
        return list(JobState.values)


def span(seconds: float | None) -> str:
    """A duration as people read it: 85 ms, 4.2 s, 3 m 5 s, 2 h 10 m, 3 d 4 h."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    for unit, size, smaller, small_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if whole >= size:
            return f"{whole // size} {unit} {(whole % size) // small_size} {smaller}"
    return f"{whole} s"  # pragma: no cover - seconds >= 60 took a unit above


def waited(job: Job, now: datetime | None = None) -> float | None:
    """How long the job waited between due and started (or until now, while due)."""
    if job.started_at is not None:
        return max((job.started_at - job.run_at).total_seconds(), 0.0)
    if job.state == JobState.READY:
        moment = now or timezone.now()
        return max((moment - job.run_at).total_seconds(), 0.0)
    return None


def took(job: Job) -> float | None:
    """How long the latest attempt ran (to now while it runs)."""
    if job.started_at is None:
        return None
    end = job.finished_at
    if end is None and job.state == JobState.RUNNING:
        end = timezone.now()
    if end is None or end < job.started_at:
        return None
    return (end - job.started_at).total_seconds()


def when(value: datetime | None) -> str:
    """An instant to the second, in the current time zone; the year only when it is
    not this one (the title holds the whole instant)."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    short = (
        "%m-%d %H:%M:%S"
        if local.year == timezone.localtime().year
        else "%Y-%m-%d %H:%M:%S"
    )
    return format_html(
        '<span title="{}">{}</span>', local.isoformat(), local.strftime(short)
    )
