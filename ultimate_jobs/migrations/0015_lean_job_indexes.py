"""Fewer index entries per enqueued job (SPEC N2, issue 26).

A ready row entered eight indexes of ultimate_jobs_job. Three become partial, each on
what every one of its readers names (docs/benchmarks.md, "Issue 26: the hot table's
indexes", lists them with their plans before and after):

* ``state_age`` (state, finished_at): finished rows only. Its readers (the archive's
  mover and clock, retention, triage, the operator lists of one finished state) all
  name a finished state; a live state's rows have the ready, waiting and leased
  indexes.
* ``tenant`` (tenant_id): rows of a tenant only. Every reader compares with a tenant.
* ``correlation`` (correlation_id, pattern opclass): rows that carry one. Its readers
  (``fired_by``) name the condition, which PostgreSQL cannot infer from a LIKE.

A ready row now enters five (the primary key, the live-key constraint, ready,
name_age, key). Reverse: the full indexes again.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0014_outbox_parent"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="job",
            name="ultimate_jobs_job_state_age",
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="ultimate_jobs_job_tenant",
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="ultimate_jobs_job_correlation",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(
                    ("state__in", ("done", "failed", "dead", "cancelled"))
                ),
                fields=["state", "finished_at"],
                name="ultimate_jobs_job_state_age",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("tenant_id__isnull", False)),
                fields=["tenant_id"],
                name="ultimate_jobs_job_tenant",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("correlation_id", ""), _negated=True),
                fields=["correlation_id"],
                name="ultimate_jobs_job_correlation",
                opclasses=("varchar_pattern_ops",),
            ),
        ),
    ]
