"""Indexes the purge reads (F3, F6), built without locking writes out.

The retention statements read each (job name, final state) by age: (name, state,
finished_at) replaces (name, state), serving every query the old index served. The
outbox purge reads published rows by age: a partial index on published_at.
"""

from __future__ import annotations

from django.contrib.postgres.operations import (
    AddIndexConcurrently,
    RemoveIndexConcurrently,
)
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("ultimate_jobs", "0008_webhooks"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["name", "state", "finished_at"],
                name="ultimate_jobs_job_name_age",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="job",
            name="ultimate_jobs_job_name_state",
        ),
        AddIndexConcurrently(
            model_name="outboxmessage",
            index=models.Index(
                condition=models.Q(("published_at__isnull", False)),
                fields=["published_at"],
                name="ultimate_jobs_outbox_published",
            ),
        ),
    ]
