"""The job detail's action buttons and attempt history (P2, P6, issue 15).

The buttons post to ``<job>/act/``: the same permissions as the list's actions
(``change_job`` to retry, cancel and promote, ``delete_job`` to remove), the same verbs
of ``ultimate_jobs.api``, the same audit (Django's admin log and the job's action
record), and one wording for every result (admin/refusals.py).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from ultimate_jobs import api
from ultimate_jobs.admin.job_list import span
from ultimate_jobs.admin.refusals import moved, refused
from ultimate_jobs.api import locator
from ultimate_jobs.api.history import attempts_json
from ultimate_jobs.ground.exceptions import JobsError
from ultimate_jobs.models import FINISHED_STATES, Job, JobStep
from ultimate_jobs.observability.redaction import shown_row

# The buttons a job in each state offers, in order (a button the state cannot use is
# not drawn; the verb still refuses it in words if a stale page posts it).
LABELS = {
    "retry": "Retry",
    "cancel": "Cancel",
    "promote": "Run now",
    "remove": "Remove",
}


# The page's sections (issue 30 item 7): a compact summary, then the attempts and the
# steps within the first 1,400 x 900 screen, then the input, outputs and logs. A read-only
# field no section names (one another page adds) goes in the last section.
SUMMARY = (
    "id",
    "name",
    "state",
    "queue",
    "attempt",
    "max_attempts",
    "priority",
    "tenant_id",
    "created_at",
    "run_at",
    "started_at",
    "finished_at",
    "worker_id",
    "lease_expires_at",
    "error_code",
    "stop_reason",
    "run_id",
    "key_link",
    "correlation_id",
    "shown_correlation_id",
    "enqueued_by_name",
    "backfill_pass",
)
SECTIONS: tuple[tuple[str | None, str, tuple[str, ...]], ...] = (
    (None, "uj-summary", SUMMARY),
    ("Attempts and steps", "uj-attempts-and-steps", ("attempt_history", "step_trace")),
    (
        "Input, output and logs",
        "uj-io",
        ("pretty_input", "pretty_error", "pretty_progress", "pretty_result", "logs"),
    ),
    ("Operators and relations", "uj-more", ("operator_actions", "family")),
)


def fieldsets(shown: list[str]) -> list[tuple[str | None, dict[str, Any]]]:
    """The sections of the job page holding the read-only fields ``shown``, in order;
    a field no section names joins the last one."""
    placed = {name for _, _, names in SECTIONS for name in names}
    sets: list[tuple[str | None, dict[str, Any]]] = []
    for index, (title, css, names) in enumerate(SECTIONS):
        fields = [name for name in names if name in shown]
        if index == len(SECTIONS) - 1:
            fields += [name for name in shown if name not in placed]
        if fields:
            sets.append((title, {"fields": fields, "classes": (css,)}))
    return sets


def offered(job: Job, *, operate: bool, remove: bool) -> list[tuple[str, str]]:
    """The (verb, label) buttons for ``job`` that the user may press."""
    verbs: list[str] = []
    if operate:
        if job.state in FINISHED_STATES:
            verbs.append("retry")
        else:
            verbs.append("cancel")
        if job.state in ("delayed", "suspended"):
            verbs.append("promote")
    if remove and job.state != "running":
        verbs.append("remove")
    return [(verb, LABELS[verb]) for verb in verbs]


def located(object_id: str) -> Job | None:
    """The job of ``object_id`` wherever it is (api/locator.py: its alias, the hot
    table or the archive, Q1, Q2), as the page's Job; None when the id is not a job id
    or no such job is stored."""
    try:
        return locator.load(uuid.UUID(str(object_id)))
    except (ValueError, JobsError):
        return None


def current_steps(job: Job) -> list[str]:
    """The names of the current stage's steps, oldest first (retry from a step)."""
    return [s.name for s in job.steps.all() if not s.archived]


def audit(request: HttpRequest, job: Job, message: str) -> None:
    """Record who did what to which job, in Django's admin log."""
    LogEntry.objects.log_actions(
        user_id=cast(int, request.user.pk),
        queryset=[job],
        action_flag=CHANGE,
        change_message=message,
        single_object=True,
    )


def act(request: HttpRequest, job: Job, *, operate: bool, remove: bool) -> HttpResponse:
    """Run the verb one button posted on ``job``; back to its page (or the list)."""
    if request.method != "POST":
        raise PermissionDenied("actions are posted from the job's page")
    verb = request.POST.get("verb", "")
    allowed = remove if verb == "remove" else operate
    if verb not in LABELS or not allowed:
        raise PermissionDenied(f"you may not {verb or 'do that'} here")
    actor = api.operator_of(request.user, source="admin")
    from_step = request.POST.get("from_step") or None
    try:
        if verb == "retry":
            api.retry(job.pk, from_step=from_step, actor=actor)
        elif verb == "cancel":
            api.cancel(job.pk, f"cancelled by {request.user}", actor=actor)
        elif verb == "promote":
            api.promote(job.pk, actor=actor)
        else:
            api.remove(job.pk, actor=actor)
    except JobsError as exc:
        messages.error(request, refused(job.pk, exc))
    else:
        detail = f" from step {from_step!r}" if from_step else ""
        audit(request, job, f"{verb}{detail} via admin")
        messages.success(request, moved(job.pk, verb).rstrip(".") + detail + ".")
        if verb == "remove":
            return HttpResponseRedirect(reverse("admin:ultimate_jobs_job_changelist"))
    return HttpResponseRedirect(
        reverse("admin:ultimate_jobs_job_change", args=[job.pk])
    )


def attempt_table(job: Job) -> str:
    """Every attempt of every run, oldest first: number, worker, started, finished,
    duration, outcome, and the error with its traceback folded (P6)."""
    rows = attempts_json(job)
    if not rows:
        return "—"

    def cells(row: dict[str, Any]) -> tuple[Any, ...]:
        error = row["error"] or ""
        first, _, rest = error.partition("\n")
        return (
            row["attempt"],
            row["run_id"][:8] + "…" if row["run_id"] != str(job.run_id) else "current",
            row["worker_id"] or "—",
            _when(row["started_at"]),
            _when(row["finished_at"]),
            row["outcome"],
            first or "—",
            format_html(
                "<details><summary>traceback</summary><pre>{}</pre></details>", rest
            )
            if rest
            else "",
        )

    body = format_html_join(
        "",
        "<tr class='uj-attempt'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td><code>{}</code>{}</td></tr>",
        (cells(row) for row in rows),
    )
    return format_html(
        "<table id='uj-attempts'><thead><tr><th>#</th><th>run</th><th>worker</th>"
        "<th>started</th><th>finished</th><th>outcome</th><th>error</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        body,
    )


def step_table(job: Job) -> str:
    """The current stage's steps, in order: kind, state, start (to the millisecond,
    UTC), how long each took, and its output redacted like the input (S1-S4, B5)."""
    view = shown_row(job)
    steps = [s for s in job.steps.all() if not s.archived]
    if not steps:
        return "—"

    def cells(step: JobStep) -> tuple[Any, ...]:
        took = (
            span((step.finished_at - step.started_at).total_seconds())
            if step.started_at and step.finished_at
            else "—"
        )
        output = "" if step.output is None else json.dumps(view.value(step.output))
        return (
            step.name,
            step.kind,
            step.status,
            _when(step.started_at.isoformat() if step.started_at else None),
            took,
            output[:500] + ("…" if len(output) > 500 else ""),
        )

    body = format_html_join(
        "",
        "<tr class='uj-step'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td><code>{}</code></td></tr>",
        (cells(step) for step in steps),
    )
    return format_html(
        "<table id='uj-steps'><thead><tr><th>step</th><th>kind</th><th>state</th>"
        "<th>started</th><th>took</th><th>output</th></tr></thead><tbody>{}</tbody>"
        "</table>",
        body,
    )


def _when(value: str | None) -> str:
    """An ISO instant to the millisecond, UTC, as every job page shows times."""
    if not value:
        return "—"
    instant = datetime.fromisoformat(value).astimezone(UTC)
    return instant.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
