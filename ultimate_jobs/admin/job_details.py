"""What the job pages show beyond the row itself (issue 20): the lines each attempt
kept through ``run.logger``, the backfill pass a job sweeps (F2), who enqueued it by
name (H2), and the idempotency-key filter (seed ``cancelByKey``).

Each reads what ``jobs show --json`` reads (the run log rows, the ledger projection,
the same display names), so the admin and the command line cannot disagree. The
input, error, correlation id, progress and result are shown redacted (B5), and the
operator actions with who did them (P2).
``JobAdmin`` (jobs.py) lists these as read-only fields and a filter; nothing here
changes a row.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from ultimate_jobs import api
from ultimate_jobs.admin.job_list import KeyFilter
from ultimate_jobs.api.attribution import display_names
from ultimate_jobs.backfills import ledger
from ultimate_jobs.models import Job
from ultimate_jobs.observability import runlogs
from ultimate_jobs.observability.redaction import shown_row

if TYPE_CHECKING:
    from django.contrib.admin.views.main import ChangeList


@admin.display(description="enqueued by")
def enqueued_by_name(job: Job) -> str:
    """The actor's display name, with the key it was recorded under."""
    if not job.enqueued_by:
        return "—"
    name = display_names([job.enqueued_by]).get(job.enqueued_by)
    return f"{name} ({job.enqueued_by})" if name else job.enqueued_by


@admin.display(description="backfill pass")
def backfill_pass(job: Job) -> str:
    """The ledger row of the backfill pass this job sweeps (pass, batches, checksum)."""
    row = ledger.by_job([job.id]).get(job.id)
    if row is None:
        return "—"
    url = reverse("admin:ultimate_jobs_backfillledger_change", args=[row.id])
    return format_html(
        '<a href="{}">pass {}</a> of {}: {} ({} batches, {} rows), checksum {}',
        url,
        row.id,
        row.name,
        row.status,
        row.batches,
        row.rows,
        row.checksum[:12],
    )


@admin.display(description="logs (run.logger)")
def run_logs(job: Job) -> str:
    """The lines each attempt kept, grouped by attempt, oldest first."""
    groups = runlogs.as_json(
        job.logs.all()
    )  # in id order; from trail in the archive (Q2)
    if not groups:
        return "—"
    view = shown_row(
        job
    )  # lines were scrubbed when written; again with what the row kept
    blocks = []
    for group in groups:
        head = f"attempt {group['attempt']}"
        if group["dropped"]:
            head += f" ({group['dropped']} older lines not kept)"
        lines = [
            f"{line['at']}  {line['level']:<7} {view.text(line['message'])}"
            for line in group["entries"]
        ]
        blocks.append((head, "\n".join(lines)))
    return format_html_join("", "<p><strong>{}</strong></p><pre>{}</pre>", blocks)


@admin.display(description="idempotency key")
def same_key_link(job: Job) -> str:
    """The job's idempotency key as shown (B5: its hidden values replaced), linked to
    every job that held it (the filter matches the shown form)."""
    key = shown_row(job).key(job.idempotency_key)
    url = reverse("admin:ultimate_jobs_job_changelist")
    query = urlencode({KeyFilter.parameter_name: key})
    return format_html('{} (<a href="{}?{}">jobs with this key</a>)', key, url, query)

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "All",
        }
        if self.value():
            yield {
                "selected": True,
                "query_string": changelist.get_query_string(
                    {self.parameter_name: self.value()}
                ),
                "display": self.value(),
            }


@admin.display(description="input")
def pretty_input(job: Job) -> str:
    """The input, redacted (B5: the job's paths and the REDACT patterns)."""
    view = shown_row(job)
    return format_html(
        "<pre>{}</pre>", json.dumps(view.input, indent=2, sort_keys=True)
    )


@admin.display(description="last error")
def pretty_error(job: Job) -> str:
    if job.state in ("done", "running"):
        # The row keeps the error of an earlier attempt: the attempt history shows it.
        return "— (earlier attempts' errors are in the attempt history)"
    return format_html("<pre>{}</pre>", shown_row(job).text(job.last_error) or "—")


@admin.display(description="correlation id")
def shown_correlation_id(job: Job) -> str:
    """The correlation id, the input's hidden values replaced (B5)."""
    return shown_row(job).text(job.correlation_id) or "—"


@admin.display(description="progress")
def pretty_progress(job: Job) -> str:
    value = shown_row(job).value(job.progress)
    return format_html("<pre>{}</pre>", json.dumps(value) if value else "—")


@admin.display(description="operator actions")
def operator_actions(job: Job) -> str:
    """Who cancelled, retried or promoted this job, and when (P2)."""
    lines = [
        f"{a['at']}  {a['action']}  by {a['actor']['name'] or '-'} "
        f"(id {a['actor']['id'] or '-'}, {a['actor']['source']})"
        f"{'  ' + a['reason'] if a['reason'] else ''}"
        for a in api.job_actions(job.pk)
    ]
    return format_html("<pre>{}</pre>", "\n".join(lines) or "—")


@admin.display(description="result")
def pretty_result(job: Job) -> str:
    if job.result is None:
        return "— (kept when the job completes)"
    value = shown_row(job).value(job.result)
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2))
