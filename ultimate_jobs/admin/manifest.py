"""The admin's *Manifest* page (J7, seed ``inspectManifest``): every job and task this
deploy declares, as ``manage.py jobs manifest --json`` answers it (``api.manifest``).

A page, not a table: ``DeclaredJob`` is a proxy model with no rows of its own, which
gives the page its place in the admin index and its URL
(``admin:ultimate_jobs_declaredjob_changelist``). Seeing it needs the permission to
view jobs; nothing on it changes anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from ultimate_jobs import api
from ultimate_jobs.admin import breadcrumbs
from ultimate_jobs.admin.permissions import ReadOnly
from ultimate_jobs.models import DeclaredJob

if TYPE_CHECKING:
    DeclaredJobModelAdmin = admin.ModelAdmin[DeclaredJob]
else:  # ModelAdmin is generic only to the type checker
    DeclaredJobModelAdmin = admin.ModelAdmin


@admin.register(DeclaredJob)
class ManifestAdmin(ReadOnly, DeclaredJobModelAdmin):
    """One read-only page listing the manifest; no list of rows, no detail."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and request.user.has_perm("ultimate_jobs.view_job")

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "",
                self.admin_site.admin_view(self.changelist_view),
                name="{}_{}_changelist".format(*info),
            )
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Manifest: the jobs and tasks this deploy declares",
            "opts": self.opts,
            "breadcrumbs_ordered": breadcrumbs.ordered(),
            "manifest": readable(api.manifest()),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/ultimate_jobs/manifest.html", context)


def retention_text(rules: dict[str, Any]) -> str:
    """``{"done": {"days": 1.0}, "dead": {"last": 100}}`` as people read it:
    ``done 1d · dead last 100`` (issue 30: the manifest showed raw dicts)."""
    parts = []
    for state, rule in rules.items():
        if isinstance(rule, dict) and set(rule) == {"days"}:
            parts.append(f"{state} {rule['days']:g}d")
        elif isinstance(rule, dict) and set(rule) == {"last"}:
            parts.append(f"{state} last {rule['last']}")
        elif rule is False:
            parts.append(f"{state} kept")
        else:
            parts.append(f"{state} {rule}")
    return " · ".join(parts)


def concurrency_text(rule: Any) -> str:
    """``{"limit": 1, "when_busy": "wait", "keyed": True}`` as ``1 per key (wait)``."""
    if rule is None:
        return "—"
    if isinstance(rule, dict) and "limit" in rule:
        scope = " per key" if rule.get("keyed") else ""
        busy = f" ({rule['when_busy']})" if rule.get("when_busy") else ""
        return f"{rule['limit']}{scope}{busy}"
    return str(rule)


def readable(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with each job's retention as text, for the page's table."""
    jobs = [
        {
            **row,
            "retention_text": retention_text(row.get("retention") or {}),
            "concurrency_text": concurrency_text(row.get("concurrency")),
        }
        for row in manifest["jobs"]
    ]
    return {**manifest, "jobs": jobs}
