"""Dead-letter triage (P10): the dashboard's groups of dead jobs by the fingerprint of
their last failed attempt, and the bounded actions on a group.

``groups()`` reads every alias that holds jobs tables (Q1) with ``triage_groups``
(sql/triage.sql): which fingerprints exist comes from the newest ``SCAN`` dead jobs,
each group's count and first/last time from every dead job (hot table and archive,
Q2), a count stopping at ``CAP``. A group's sample is its newest dead job, shown
redacted (B5). ``retry_group`` and ``cancel_group`` are the bulk verbs filtered by the
fingerprint: at most 1,000 jobs a call (per state for a cancel), each audited with
the actor like the single verb.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ultimate_jobs.api.verbs import bulk
from ultimate_jobs.conf import reading_aliases
from ultimate_jobs.db import DjangoDatabase
from ultimate_jobs.models import Job, JobArchive
from ultimate_jobs.observability.redaction import shown_row
from ultimate_jobs.observability.triage import check_fingerprint
from ultimate_jobs.sql import QUERIES

SCAN = 200  # the newest dead jobs the groups are found among
CAP = 10_000  # a group's count stops here ("10,000 or more"), per table
GROUPS = 20  # groups shown
CANCEL_STATES = ("ready", "delayed", "suspended")  # live jobs still retrying it


def groups(limit: int = GROUPS) -> list[dict[str, Any]]:
    """The largest groups of dead jobs, each: fingerprint, jobs (capped, with
    ``capped``), first_seen, last_seen, and a sample (id, name, queue, error)."""
    found: dict[str, dict[str, Any]] = {}
    samples: dict[str, tuple[str, Any]] = {}
    for alias in reading_aliases():
        database = DjangoDatabase(alias)
        with transaction.atomic(using=alias):
            database.run(QUERIES["console_jit_off"])  # P7: compiling cost more
            rows = database.run(
                QUERIES["triage_groups"], scan=SCAN, cap=CAP, groups=limit
            )
        for row in rows:
            group = found.setdefault(
                row["fingerprint"],
                {
                    "fingerprint": row["fingerprint"],
                    "jobs": 0,
                    "first_seen": row["first_seen"],
                    "last_seen": row["last_seen"],
                },
            )
            group["jobs"] += row["jobs"]
            if row["first_seen"] and (
                group["first_seen"] is None or row["first_seen"] < group["first_seen"]
            ):
                group["first_seen"] = row["first_seen"]
            if row["last_seen"] and (
                group["last_seen"] is None or row["last_seen"] >= group["last_seen"]
            ):
                group["last_seen"] = row["last_seen"]
                samples[row["fingerprint"]] = (alias, row["sample_id"])
            samples.setdefault(row["fingerprint"], (alias, row["sample_id"]))
    ordered = sorted(
        found.values(),
        key=lambda g: (-g["jobs"], g["fingerprint"]),
    )[:limit]
    for group in ordered:
        alias, pk = samples[group["fingerprint"]]
        group["capped"] = group["jobs"] >= CAP
        group["sample"] = _sample(alias, pk)
    return ordered


def _sample(alias: str, pk: Any) -> dict[str, Any] | None:
    job: Any = Job.objects.using(alias).filter(pk=pk).first()
    if job is None:
        job = JobArchive.objects.using(alias).filter(pk=pk).first()
    if job is None:  # moved or removed between the two reads
        return None
    view = shown_row(job)
    error = view.text(job.last_error) or ""
    return {
        "id": str(job.pk),
        "name": job.name,
        "queue": job.queue,
        "error": error.split("\n", 1)[0][:300],
    }


def retry_group(fingerprint: str, *, actor: Any = None) -> dict[str, int]:
    """Retry up to 1,000 dead jobs of the group (P2's bulk retry, audited)."""
    return bulk(
        "retry", state="dead", fingerprint=check_fingerprint(fingerprint), actor=actor
    )


def cancel_group(
    fingerprint: str, *, reason: str = "", actor: Any = None
) -> dict[str, int]:
    """Cancel the live jobs still retrying the group's failure (their last failed
    attempt has the fingerprint): up to 1,000 per live state, audited."""
    check_fingerprint(fingerprint)
    total = {"affected": 0, "remaining": 0}
    for state in CANCEL_STATES:
        answer = bulk(
            "cancel",
            state=state,
            fingerprint=fingerprint,
            reason=reason or f"cancel-group {fingerprint}",
            actor=actor,
        )
        total["affected"] += answer["affected"]
        total["remaining"] += answer["remaining"]
    return total
