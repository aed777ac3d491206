"""Admin pages of the scheduler (P1, C6, C7): runtime schedules, task fires, the lease.

Schedules are edited like django-celery-beat's periodic tasks: the form checks a row
with the errors ``@task`` raises (the same messages), and the scheduler leader uses the
saved row from its next tick. Pause, resume and run now call ``ultimate_jobs.schedules``
(the Python API), need the change permission and are recorded in the admin log.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from ultimate_jobs.admin.permissions import NoAddOrDelete, ReadOnly
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.exceptions import JobsError
from ultimate_jobs.models import LeaderLease, Schedule, TaskWatermark
from ultimate_jobs.scheduling import schedules

if TYPE_CHECKING:
    ScheduleModelAdmin = admin.ModelAdmin[Schedule]
    TaskWatermarkModelAdmin = admin.ModelAdmin[TaskWatermark]
    LeaderLeaseModelAdmin = admin.ModelAdmin[LeaderLease]
else:  # ModelAdmin is generic only to the type checker
    ScheduleModelAdmin = TaskWatermarkModelAdmin = LeaderLeaseModelAdmin = (
        admin.ModelAdmin
    )


def _audit(request: HttpRequest, row: Model, message: str) -> None:
    LogEntry.objects.log_actions(
        user_id=cast(int, request.user.pk),
        queryset=[row],
        action_flag=CHANGE,
        change_message=message,
        single_object=True,
    )


def _act(
    request: HttpRequest, rows: list[tuple[Model, str]], verb: str, call: Any
) -> None:
    """Apply one verb to named tasks or schedules; report what happened."""
    done, refused = 0, []
    for row, name in rows:
        try:
            call(name)
        except JobsError as exc:
            refused.append(f"{name}: {exc}")
            continue
        done += 1
        _audit(request, row, f"{verb} via admin")
    messages.info(request, f"{verb}: {done} done, {len(refused)} refused")
    for line in refused[:10]:
        messages.warning(request, line)


def _next_run(cron: str, tz: str) -> str:
    try:
        return schedules.next_run_of(cron, tz).isoformat(sep=" ", timespec="minutes")
    except JobsError:
        return "—"


class _InputField(forms.JSONField):
    """The schedule's input, shown back as ASCII JSON: a refused value holding a lone
    surrogate must render in the form's errors, not break the page (B4)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, forms.fields.JSONString):
            return value  # the text as typed (InvalidJSONInput)
        return json.dumps(value, ensure_ascii=True, cls=self.encoder)


class ScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    job = forms.ChoiceField(choices=())
    input = _InputField(required=False, initial=dict)

    class Meta:
        model = Schedule
        fields = (
            "key",
            "job",
            "input",
            "cron",
            "tz",
            "catch_up",
            "max_catch_up",
            "description",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = registry.names()
        current = self.instance.job if self.instance.pk else None
        if current and current not in names:
            names = [current, *names]  # a job this release no longer declares
        self.fields["job"].choices = [(n, n) for n in names]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        """The checks saving runs (InvalidCron, ...), as errors of their fields."""
        cleaned = super().clean() or {}
        fields = {name: cleaned[name] for name in self.Meta.fields if name in cleaned}
        schedules.schedule_errors(Schedule(**fields))
        return cleaned


class _Verbs:
    """Pause, resume and run now, for a list page whose rows name a task or schedule."""

    def _names(self, queryset: QuerySet[Any]) -> list[tuple[Model, str]]:
        raise NotImplementedError

    @admin.action(description="Pause", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        by = str(request.user)
        _act(
            request,
            self._names(queryset),
            "pause",
            lambda n: schedules.pause_task(n, by=by),
        )

    @admin.action(description="Resume", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        _act(request, self._names(queryset), "resume", schedules.resume_task)

    @admin.action(description="Run now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # Refused (X_TASK_RUNNING) while a run of the task is live (C7).
        _act(
            request,
            self._names(queryset),
            "run now",
            lambda n: schedules.trigger(n, actor=request.user),
        )

    @admin.action(
        description="Run now, even while a run is live", permissions=["change"]
    )
    def run_now_forced(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        _act(
            request,
            self._names(queryset),
            "run now (forced)",
            lambda n: schedules.trigger(n, actor=request.user, force=True),
        )


@admin.register(Schedule)
class ScheduleAdmin(_Verbs, ScheduleModelAdmin):
    form = ScheduleForm
    list_display = ("key", "job", "cron", "tz", "catch_up", "next_run", "last_fire")
    search_fields = ("key", "job")
    list_filter = ("job", "catch_up")
    actions = ("pause", "resume", "run_now", "run_now_forced")

    def _names(self, queryset: QuerySet[Schedule]) -> list[tuple[Model, str]]:
        return [(row, row.key) for row in queryset]

    @admin.display(description="next run")
    def next_run(self, row: Schedule) -> str:
        return _next_run(row.cron, row.tz)

    @admin.display(description="last fire")
    def last_fire(self, row: Schedule) -> str:
        mark = TaskWatermark.objects.filter(key=row.watermark_key).first()
        if mark is None or mark.last_fired_at is None:
            return "paused" if mark and mark.paused else "—"
        paused = " (paused)" if mark.paused else ""
        return f"{mark.last_fired_at:%Y-%m-%d %H:%M:%S}{paused}"


@admin.register(TaskWatermark)
class TaskWatermarkAdmin(NoAddOrDelete, _Verbs, TaskWatermarkModelAdmin):
    list_display = (
        "key",
        "spec",
        "paused",
        "last_fired_occurrence",
        "last_fired_at",
        "fires",
        "last_occurrence",
        "next_run",
    )
    list_filter = ("kind", "paused")
    search_fields = ("key",)
    actions = ("pause", "resume", "run_now", "run_now_forced")

    def _names(self, queryset: QuerySet[TaskWatermark]) -> list[tuple[Model, str]]:
        return [(row, row.name) for row in queryset]

    @admin.display(description="next run")
    def next_run(self, row: TaskWatermark) -> str:
        cron, _, tz = row.spec.rpartition(" ")
        return _next_run(cron, tz) if cron else "—"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list is read-only; the actions need the change permission itself.
        return obj is None and request.user.has_perm(
            "ultimate_jobs.change_taskwatermark"
        )


@admin.register(LeaderLease)
class LeaderLeaseAdmin(ReadOnly, LeaderLeaseModelAdmin):
    list_display = ("role", "holder", "term", "acquired_at", "renewed_at", "expires_at")
