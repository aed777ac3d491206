"""The admin's *Manifest* page (J7, seed ``inspectManifest``): every job and task this
deploy declares, as ``manage.py jobs manifest --json`` answers it (``api.manifest``).

The page is a table a person reads: every value in words (``5 attempts,
exponential from 1 s up to 300 s``, ``dead 30 d``), never a Python dict (issue 30
item 7). A page, not a model's list: ``DeclaredJob`` is a proxy model with no rows of its own, which
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
from ultimate_jobs.admin.guard import guard_urls
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
        return guard_urls(
            [
                path(
                    "",
                    self.admin_site.admin_view(self.changelist_view),
                    name="{}_{}_changelist".format(*info),
                )
            ]
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Manifest: the jobs and tasks this deploy declares",
            "opts": self.opts,
            "manifest": readable(api.manifest()),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/ultimate_jobs/manifest.html", context)


def readable(manifest: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``manifest`` with each job's nested values as words, for the page's table."""
    return {
        "jobs": [
            row
            | {
                "retry_words": _retry(row["retry"]),
                "retention_words": [
                    f"{state} {_rule(rule)}" for state, rule in row["retention"].items()
                ],
                "concurrency_words": _concurrency(row["concurrency"]),
                "inputs": ", ".join(row.get("input", {})),
            }
            for row in manifest["jobs"]
        ],
        "tasks": manifest["tasks"],
    }


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _retry(retry: dict[str, Any]) -> str:
    words = f"{retry['attempts']} attempt{'s' if retry['attempts'] != 1 else ''}"
    if retry["attempts"] > 1:
        words += (
            f", {retry['backoff']} from {_seconds(retry['delay'])}"
            f" up to {_seconds(retry['max_delay'])}"
            + (", jittered" if retry.get("jitter") else "")
        )
    return words


def _rule(rule: Any) -> str:
    """A retention rule: ``False`` (purged when it finishes), days, a count, or both."""
    if rule is False:
        return "not kept"
    parts = []
    if "days" in rule:
        parts.append(f"{rule['days']:g} d")
    if "last" in rule:
        parts.append(f"last {rule['last']}")
    return ", ".join(parts) or "kept"


def _concurrency(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):
        keyed = " per key" if value.get("keyed") else ""
        return f"{value['limit']}{keyed}, {value['when_busy']} when busy"
    return str(value)
