"""The job page's parent and children (S11): the job's parent with its state, and its
children as counts by state, then the first CHILDREN_SHOWN of them (oldest first), each
linked to its page, read on the job's alias and every other alias with jobs tables (Q1); the list of all of them is the job list filtered by parent, whose
pages are keyset pages, so a parent of 10,000 children stays one screen. Rendered by the
template partial ``admin/ultimate_jobs/job/family.html``."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from ultimate_jobs.admin.job_list import DatabaseFilter, ParentFilter, StateFilter
from ultimate_jobs.api.reads import family_tables
from ultimate_jobs.conf import get_settings
from ultimate_jobs.models import Job

CHILDREN_SHOWN = 20


def family(job: Job) -> SafeString:
    """The parent and children of ``job``, or a dash when it has neither."""
    alias = job._state.db or get_settings().DATABASE
    url = reverse("admin:ultimate_jobs_job_changelist")
    parent = None
    if job.parent_id is not None:
        found = [
            row
            for _, table in family_tables(alias)
            for row in table.filter(pk=job.parent_id).values("id", "name", "state")
        ]
        parent = found[0] if found else {"id": job.parent_id, "name": "", "state": "?"}
    counts: dict[tuple[str, str], int] = {}
    shown: list[dict[str, Any]] = []
    for each, table in family_tables(alias):
        children = table.filter(parent_id=job.id)
        for row in children.values("state").annotate(n=Count("id")).order_by():
            counts[each, row["state"]] = counts.get((each, row["state"]), 0) + row["n"]
        shown += children.order_by("id").values("id", "name", "state")[:CHILDREN_SHOWN]
    shown = sorted(shown, key=lambda row: row["id"])[:CHILDREN_SHOWN]
    total = sum(counts.values())
    holding = sorted({each for each, _ in counts})
    per_alias = {
        each: sum(n for (at, _), n in counts.items() if at == each) for each in holding
    }
    return render_to_string(
        "admin/ultimate_jobs/job/family.html",
        {
            "parent": parent,
            "children": shown,
            "total": total,
            "more": total > len(shown),
            "several": len(holding) > 1,
            "by_state": [
                (
                    state,
                    n,
                    each,
                    _list_url(
                        url,
                        each,
                        {
                            ParentFilter.parameter_name: str(job.id),
                            StateFilter.parameter_name: state,
                        },
                    ),
                )
                for (each, state), n in sorted(counts.items())
            ],
            "all_urls": [
                (
                    each,
                    per_alias[each],
                    _list_url(url, each, {ParentFilter.parameter_name: str(job.id)}),
                )
                for each in holding
            ],
        },
    )


def _list_url(url: str, alias: str, query: dict[str, str]) -> str:
    """The job list filtered by ``query`` on ``alias``: the list shows DATABASE's jobs
    unless ``?database=`` names another alias (Q1), so children on another alias
    are linked with it."""
    if alias != get_settings().DATABASE:
        query = {**query, DatabaseFilter.parameter_name: alias}
    return f"{url}?" + urlencode(query)
