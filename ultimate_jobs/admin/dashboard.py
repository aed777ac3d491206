"""The admin's dashboard and queues page (P7, issue 15).

One page, the first an operator opens: per queue its jobs by state, depth and oldest
due age (the metrics' numbers, M1), running, dead, paused (by whom, since when), the
throughput and failure rate of the last hour and day, and a chart of the last 24 hours
drawn as SVG on the server (admin/charts.py). Every queue links to its jobs. Pause and
Resume are buttons: they need ``change_job``, record who paused, go through
``ultimate_jobs.api`` (a resume wakes the queue's workers, N1) and refuse a queue name
nobody declares or uses. *Retry dead* requeues up to 1,000 of a queue's dead jobs per
press (the bulk retry, P2; each job's retry recorded with the admin user). Dead
letters are grouped by the fingerprint of their last failed attempt (P10: count, first
and last seen, a redacted sample) with Retry-group and Cancel-group buttons, bounded
and audited like *Retry dead* (api/triage.py). Numbers come
from ``api.overview`` (api/overview.py), which reads every alias that holds jobs tables
(Q1): with several, each queue names its database and links to its jobs there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from ultimate_jobs import api
from ultimate_jobs.admin import charts
from ultimate_jobs.admin.guard import guard_urls
from ultimate_jobs.admin.permissions import ReadOnly
from ultimate_jobs.admin.refusals import bulk_summary
from ultimate_jobs.api import BULK_LIMIT, triage
from ultimate_jobs.api.overview import overview
from ultimate_jobs.api.unserved import unserved
from ultimate_jobs.conf import get_settings
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.models import Dashboard

if TYPE_CHECKING:
    DashboardModelAdmin = admin.ModelAdmin[Dashboard]
else:  # ModelAdmin is generic only to the type checker
    DashboardModelAdmin = admin.ModelAdmin


def rows(queues: list[dict[str, Any]], hours: list[str]) -> list[dict[str, Any]]:
    """What the template shows per queue: the numbers formatted, the chart drawn."""
    jobs = reverse("admin:ultimate_jobs_job_changelist")
    shown = []
    for queue in queues:
        where = {"queue": queue["queue"]}
        if queue["database"] != get_settings().DATABASE:
            where["database"] = queue["database"]  # Q1: the job list's alias filter
        shown.append(
            {
                **queue,
                "jobs_url": f"{jobs}?{urlencode(where)}",
                "dead_url": f"{jobs}?{urlencode(where | {'state': 'dead'})}",
                "oldest": charts.age(queue["oldest_ready_seconds"]),
                "hour_rate": charts.percent(queue["hour"]["failure_rate"]),
                "day_rate": charts.percent(queue["day"]["failure_rate"]),
                "chart": charts.hourly_bars(
                    queue["series"],
                    hours,
                    label=f"queue {queue['queue']}, last 24 hours",
                ),
            }
        )
    return shown


def triage_rows(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the template shows per dead-letter group (P10)."""
    jobs = reverse("admin:ultimate_jobs_job_changelist")
    shown = []
    for group in groups:
        sample = group["sample"]
        shown.append(
            {
                **group,
                "count": f"{group['jobs']:,}{' or more' if group['capped'] else ''}",
                "first": group["first_seen"].isoformat(timespec="seconds")
                if group["first_seen"]
                else "—",
                "last": group["last_seen"].isoformat(timespec="seconds")
                if group["last_seen"]
                else "—",
                "sample_url": reverse(
                    "admin:ultimate_jobs_job_change", args=[sample["id"]]
                )
                if sample
                else "",
                "jobs_url": f"{jobs}?{urlencode({'state': 'dead'})}",
            }
        )
    return shown


@admin.register(Dashboard)
class DashboardAdmin(ReadOnly, DashboardModelAdmin):
    """The dashboard page and its pause/resume endpoint; no rows of its own."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and request.user.has_perm("ultimate_jobs.view_job")

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ultimate_jobs.change_job")

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return guard_urls(
            [
                path(
                    "",
                    self.admin_site.admin_view(self.changelist_view),
                    name="{}_{}_changelist".format(*info),
                ),
                path(
                    "queue/",
                    self.admin_site.admin_view(self.queue_view),
                    name="{}_{}_queue".format(*info),
                ),
                path(
                    "triage/",
                    self.admin_site.admin_view(self.triage_view),
                    name="{}_{}_triage".format(*info),
                ),
            ]
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        numbers = overview()
        queues = numbers["queues"]
        total = charts.totals(queues)
        context = {
            **self.admin_site.each_context(request),
            "title": "Dashboard: queues, throughput and failures",
            "opts": self.opts,
            "queues": rows(queues, numbers["hours"]),
            "chart": charts.hourly_bars(
                total, numbers["hours"], width=576, height=96, label="all queues"
            )
            if total
            else "",
            "totals": {
                state: sum(q["states"][state] for q in queues)
                for state in ("ready", "delayed", "running", "suspended", "dead")
            }
            | {
                "depth": sum(q["depth"] for q in queues),
                "hour_done": sum(q["hour"]["done"] for q in queues),
                "hour_failed": sum(q["hour"]["failed"] for q in queues),
                "day_done": sum(q["day"]["done"] for q in queues),
                "day_failed": sum(q["day"]["failed"] for q in queues),
                "paused": sum(1 for q in queues if q["paused"]),
            },
            "can_operate": self.has_operate_permission(request),
            "queue_url": reverse("admin:ultimate_jobs_dashboard_queue"),
            "workers": len(api.workers()),
            "unserved": unserved(queues),
            "triage": triage_rows(triage.groups()),
            "triage_url": reverse("admin:ultimate_jobs_dashboard_triage"),
            "several_databases": len(get_settings().aliases) > 1,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/ultimate_jobs/dashboard.html", context)

    def queue_view(self, request: HttpRequest) -> HttpResponse:
        """Pause or resume one queue from its button (POST)."""
        if request.method != "POST" or not self.has_operate_permission(request):
            raise PermissionDenied("pausing a queue needs the change_job permission")
        queue = request.POST.get("queue", "")
        verb = request.POST.get("verb", "")
        known = {q["queue"] for q in overview()["queues"]}
        back = HttpResponseRedirect(reverse("admin:ultimate_jobs_dashboard_changelist"))
        if queue not in known:
            messages.error(
                request,
                f"Queue {queue!r} is not declared by any job nor used by any row; "
                "nothing was paused or resumed.",
            )
            return back
        if verb == "retry-dead":
            return self._retry_dead(request, queue, back)
        try:
            if verb == "pause":
                by = f"{request.user.get_username()} (admin)"
                changed = api.pause_queue(queue, by=by)
                said = "paused" if changed else "was already paused"
            elif verb == "resume":
                changed = api.resume_queue(queue)
                said = (
                    "resumed; its workers were woken" if changed else "was not paused"
                )
            else:
                raise PermissionDenied(f"unknown queue action {verb!r}")
        except JobsError as exc:
            messages.error(
                request, f"Queue {queue!r} was refused: {exc.message}. [{exc.code}]"
            )
            return back
        (messages.success if changed else messages.warning)(
            request, f"Queue {queue!r} {said}."
        )
        return back

    def triage_view(self, request: HttpRequest) -> HttpResponse:
        """Retry-group or Cancel-group of one fingerprint (POST, P10): change_job
        needed, at most 1,000 jobs a press (per state for a cancel), each audited."""
        if request.method != "POST" or not self.has_operate_permission(request):
            raise PermissionDenied("acting on a group needs the change_job permission")
        fingerprint = request.POST.get("fingerprint", "")
        verb = request.POST.get("verb", "")
        back = HttpResponseRedirect(reverse("admin:ultimate_jobs_dashboard_changelist"))
        actor = api.operator_of(request.user, source="admin")
        try:
            if verb == "retry-group":
                answer = triage.retry_group(fingerprint, actor=actor)
                kind = "retry"
            elif verb == "cancel-group":
                answer = triage.cancel_group(fingerprint, actor=actor)
                kind = "cancel"
            else:
                raise PermissionDenied(f"unknown group action {verb!r}")
        except JobsError as exc:
            messages.error(request, f"Group refused: {exc.message}. [{exc.code}]")
            return back
        messages.success(
            request,
            bulk_summary(
                kind, answer["affected"], 0, answer["remaining"], BULK_LIMIT
            ).replace(f"{kind.capitalize()}:", f"Group {fingerprint}, {kind}:", 1),
        )
        return back

    def _retry_dead(
        self, request: HttpRequest, queue: str, back: HttpResponse
    ) -> HttpResponse:
        """Retry the queue's dead jobs, at most 1,000 a press (P2), audited per job."""
        actor = api.operator_of(request.user, source="admin")
        answer = api.bulk("retry", state="dead", queue=queue, actor=actor)
        messages.success(
            request,
            bulk_summary(
                "retry", answer["affected"], 0, answer["remaining"], BULK_LIMIT
            ).replace("Retry:", f"Queue {queue!r}, retry dead:", 1),
        )
        return back
