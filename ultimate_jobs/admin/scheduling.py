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
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from ultimate_jobs.admin.guard import InputGuard
from ultimate_jobs.admin.job_list import DatabaseFilter
from ultimate_jobs.admin.permissions import NoAddOrDelete, ReadOnly
from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground.bounds import json_problem
from ultimate_jobs.ground.exceptions import JobsError
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


def _what(row: Model) -> str:
    """``Task nightly`` or ``Schedule ops``: how a message names the row."""
    if isinstance(row, Schedule):
        return f"Schedule {row.key}"
    kind = getattr(row, "kind", "task")
    return f"{'Schedule' if kind == 'schedule' else 'Task'} {getattr(row, 'name', row)}"


def _said(verb: str, answer: Any) -> str:
    """What one action did, in the one wording every admin result uses."""
    if verb.startswith("run now") and isinstance(answer, list):
        fresh = sum(1 for a in answer if not getattr(a, "deduped", False))
        deduped = len(answer) - fresh
        tail = f"{fresh} job{'s' if fresh != 1 else ''} enqueued"
        if deduped:
            tail += f", {deduped} already queued under the same key"
        return f"{verb} ({tail})"
    if answer is False:
        return {"pause": "was already paused", "resume": "was not paused"}.get(
            verb, verb
        )
    return {"pause": "paused", "resume": "resumed"}.get(verb, verb)


def _act(
    request: HttpRequest, rows: list[tuple[Model, str]], verb: str, call: Any
) -> None:
    """Apply one verb to named tasks or schedules; one message per row, in words."""
    for row, name in rows[:100]:
        try:
            answer = call(name)
        except JobsError as exc:
            reason = exc.message.split(": ", 1)[-1]
            messages.error(request, f"{_what(row)} was refused: {reason}. [{exc.code}]")
            continue
        _audit(request, row, f"{verb} via admin")
        said = _said(verb, answer)
        joiner = " " if said.startswith("was ") else ": "
        messages.success(request, f"{_what(row)}{joiner}{said}.")


def _next_run(cron: str, tz: str, *, paused: bool = False) -> str:
    """The next occurrence in the task's own zone; none while it is paused."""
    if paused:
        return "— (paused)"
    try:
        moment = schedules.next_run_of(cron, tz)
    except JobsError:
        return "—"
    return f"{moment:%Y-%m-%d %H:%M} {tz}"


def _state(mark: TaskWatermark | None) -> str:
    """``active``, or ``paused by … since …``: said, never a tick or a cross."""
    if mark is None or not mark.paused:
        return "active"
    since = f" since {mark.paused_at:%Y-%m-%d %H:%M} UTC" if mark.paused_at else ""
    return f"paused by {mark.paused_by or '?'}{since}"


def _fired_jobs_link(key: str) -> str:
    """A link to the jobs this task or schedule fired (their correlation ids)."""
    url = reverse("admin:ultimate_jobs_job_changelist")
    return format_html(
        '<a href="{}?{}">jobs it fired</a>', url, urlencode({"fired_by": key})
    )


class _InputField(forms.JSONField):
    """The schedule's input, shown back as ASCII JSON: a refused value holding a lone
    surrogate must render in the form's errors, not break the page (B4)."""

    def to_python(self, value: Any) -> Any:
        """The input, refused as a form error when it nests past MAX_INPUT_DEPTH or
        holds what PostgreSQL cannot (issue 31: deep JSON answered 500)."""
        try:
            parsed = super().to_python(value)
        except RecursionError:
            parsed = None
            deep = True
        else:
            deep = False
        depth = get_settings().MAX_INPUT_DEPTH
        found = None if deep else json_problem(parsed, max_depth=depth)
        if deep or (found is not None and found.kind == "deep"):
            raise ValidationError(
                f"X_INPUT_TOO_DEEP: input is nested deeper than {depth} levels",
                code="input_too_deep",
            )
        if found is not None:
            raise ValidationError(
                f"X_INVALID_PAYLOAD: input{'.' + found.path if found.path else ''}: "
                f"{found.reason}",
                code="invalid_payload",
            )
        return parsed

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:  # too deep to parse: shown back as typed
            return forms.fields.InvalidJSONInput(data)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, forms.fields.JSONString):
            return value  # the text as typed (InvalidJSONInput)
        try:
            return json.dumps(value, ensure_ascii=True, cls=self.encoder)
        except (RecursionError, ValueError):
            return "{}"


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
        job = str(cleaned.get("job") or "")
        here = get_settings().DATABASE
        if (where := schedules.schedule_alias(job)) != here:
            # Q1: the admin keeps schedules on DATABASE, whose leader would not fire
            # a job of a queue that lives on another alias.
            raise ValidationError(
                {
                    "job": f"{job}'s queue lives on database {where!r}, and this "
                    f"page keeps schedules on {here!r}: create it with "
                    "ultimate_jobs.recur(), which keeps it on its queue's database"
                }
            )
        return cleaned


class _Verbs(InputGuard):
    """Pause, resume and run now, for a list page whose rows name a task or schedule."""

    def _names(self, queryset: QuerySet[Any]) -> list[tuple[Model, str]]:
        raise NotImplementedError

    @admin.action(description="Pause", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        by = f"{request.user.get_username()} (admin)"
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
    list_display = (
        "key",
        "state",
        "next_run",
        "last_fire",
        "job",
        "cron",
        "tz",
        "catch_up",
        "fired",
    )
    search_fields = ("key", "job")
    # Q1: a schedule lives on its job's queue's alias (recur); listed by this filter.
    list_filter = (DatabaseFilter, "job", "catch_up")
    actions = ("pause", "resume", "run_now", "run_now_forced")

    def _names(self, queryset: QuerySet[Schedule]) -> list[tuple[Model, str]]:
        return [(row, row.key) for row in queryset]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("state", "next_run", "last_fire", "fired") if obj else ()

    def _mark(self, row: Schedule) -> TaskWatermark | None:
        marks = TaskWatermark.objects.using(row._state.db or get_settings().DATABASE)
        return marks.filter(key=row.watermark_key).first()

    @admin.display(description="state")
    def state(self, row: Schedule) -> str:
        return _state(self._mark(row))

    @admin.display(description="next run")
    def next_run(self, row: Schedule) -> str:
        mark = self._mark(row)
        return _next_run(row.cron, row.tz, paused=bool(mark and mark.paused))

    @admin.display(description="last fire")
    def last_fire(self, row: Schedule) -> str:
        mark = self._mark(row)
        if mark is None or mark.last_fired_at is None:
            return "—"
        return f"{mark.last_fired_at:%Y-%m-%d %H:%M:%S} UTC"

    @admin.display(description="fires")
    def fired(self, row: Schedule) -> str:
        return _fired_jobs_link(row.watermark_key)


@admin.register(TaskWatermark)
class TaskWatermarkAdmin(NoAddOrDelete, _Verbs, TaskWatermarkModelAdmin):
    list_display = (
        "key",
        "state",
        "next_run",
        "last_fired_occurrence",
        "fires",
        "fired",
        "spec",
        "last_fired_at",
    )
    list_filter = (DatabaseFilter, "kind", "paused")  # Q1: each alias's watermarks
    search_fields = ("key",)
    actions = ("pause", "resume", "run_now", "run_now_forced")

    def _names(self, queryset: QuerySet[TaskWatermark]) -> list[tuple[Model, str]]:
        return [(row, row.name) for row in queryset]

    @admin.display(description="state")
    def state(self, row: TaskWatermark) -> str:
        return _state(row)

    @admin.display(description="next run")
    def next_run(self, row: TaskWatermark) -> str:
        cron, _, tz = row.spec.rpartition(" ")
        return _next_run(cron, tz, paused=row.paused) if cron else "—"

    @admin.display(description="jobs")
    def fired(self, row: TaskWatermark) -> str:
        return _fired_jobs_link(row.key)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list is read-only; the actions need the change permission itself.
        return obj is None and request.user.has_perm(
            "ultimate_jobs.change_taskwatermark"
        )


@admin.register(LeaderLease)
class LeaderLeaseAdmin(ReadOnly, LeaderLeaseModelAdmin):
    list_display = ("role", "holder", "term", "acquired_at", "renewed_at", "expires_at")
