"""Per-attempt log lines (issue 20: seed logMaxEntries) and the manifest's admin page.

``ultimate_jobs_run_log`` holds one row per attempt that logged through run.logger;
``DeclaredJob`` is a proxy (no table) that gives the admin its manifest page (J7).
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0002_hardening"),
    ]

    operations = [
        migrations.CreateModel(
            name="DeclaredJob",
            fields=[],
            options={
                "verbose_name": "declared job or task",
                "verbose_name_plural": "manifest",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("ultimate_jobs.job",),
        ),
        migrations.CreateModel(
            name="RunLog",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("run_id", models.UUIDField()),
                ("attempt", models.IntegerField()),
                ("entries", models.JSONField(default=list)),
                ("dropped", models.IntegerField(default=0)),
                (
                    "written_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="logs",
                        to="ultimate_jobs.job",
                    ),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_run_log",
                "ordering": ("id",),
            },
        ),
        # Retention trims a job's log rows with the job (F6), whichever way the job row
        # is deleted; Django 5.2 cannot declare a database-level cascade.
        migrations.RunSQL(
            sql=(
                "ALTER TABLE ultimate_jobs_run_log ADD CONSTRAINT ultimate_jobs_run_log_job_fk "
                "FOREIGN KEY (job_id) REFERENCES ultimate_jobs_job (id) ON DELETE CASCADE"
            ),
            reverse_sql=(
                "ALTER TABLE ultimate_jobs_run_log DROP CONSTRAINT ultimate_jobs_run_log_job_fk"
            ),
        ),
    ]
