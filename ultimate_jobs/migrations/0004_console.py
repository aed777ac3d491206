"""The operator console (issue 15): the attempt history (P6), the dashboard's admin
page (P7), the indexes the admin's search by idempotency key (P1) and its list of the
jobs a task fired (C7) use, a worker's drain request (W8), and the spelling of
"webhook deliveries".

``ultimate_jobs_attempt`` keeps the attempts the job row no longer shows; ``Dashboard``
is a proxy (no table) that gives the admin its dashboard and queues page.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0003_run_logs"),
    ]

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[],
            options={
                "verbose_name": "dashboard",
                "verbose_name_plural": "dashboard and queues",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("ultimate_jobs.job",),
        ),
        migrations.CreateModel(
            name="Attempt",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("run_id", models.UUIDField()),
                ("attempt", models.IntegerField()),
                (
                    "worker_id",
                    models.CharField(blank=True, db_default="", max_length=200),
                ),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("outcome", models.CharField(max_length=32)),
                ("error", models.TextField(blank=True, db_default="")),
                (
                    "error_code",
                    models.CharField(blank=True, db_default="", max_length=64),
                ),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="attempts",
                        to="ultimate_jobs.job",
                    ),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_attempt",
                "ordering": ("id",),
                "indexes": [
                    models.Index(fields=["job", "id"], name="ultimate_jobs_attempt_job")
                ],
            },
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=["idempotency_key"],
                name="ultimate_jobs_job_key",
                opclasses=("varchar_pattern_ops",),
            ),
        ),
        migrations.AddField(
            model_name="worker",
            name="drain_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="worker",
            name="drain_requested_by",
            field=models.CharField(blank=True, db_default="", max_length=255),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=["correlation_id"],
                name="ultimate_jobs_job_correlation",
                opclasses=("varchar_pattern_ops",),
            ),
        ),
        migrations.AlterModelOptions(
            name="webhookdelivery",
            options={"ordering": ("-id",), "verbose_name_plural": "webhook deliveries"},
        ),
        # Retention trims a job's attempts with the job (F6), whichever way the job row
        # is deleted; Django 5.2 cannot declare a database-level cascade.
        migrations.RunSQL(
            sql=(
                "ALTER TABLE ultimate_jobs_attempt ADD CONSTRAINT ultimate_jobs_attempt_job_fk "
                "FOREIGN KEY (job_id) REFERENCES ultimate_jobs_job (id) ON DELETE CASCADE"
            ),
            reverse_sql=(
                "ALTER TABLE ultimate_jobs_attempt DROP CONSTRAINT ultimate_jobs_attempt_job_fk"
            ),
        ),
    ]
