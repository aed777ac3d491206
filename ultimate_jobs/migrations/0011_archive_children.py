"""A parent's children in the archive by an index (issue 27, P7).

The job page of a parent counts and lists its children in both tables (S10, Q2); the
hot table has ``ultimate_jobs_job_children`` (0010), the archive had none, so each
page read every archived row: 570 ms of a dead job's 730 ms page at 1,000,000 jobs.
The index is created on the partitioned table, so each day's partition, present and
future, gets its own.
"""

from django.db import migrations

ARCHIVE_CHILDREN = """
CREATE INDEX IF NOT EXISTS ultimate_jobs_job_archive_children
    ON ultimate_jobs_job_archive (parent_id, id) WHERE parent_id IS NOT NULL;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0010_workflows"),
    ]

    operations = [
        migrations.RunSQL(
            sql=ARCHIVE_CHILDREN,
            reverse_sql="DROP INDEX IF EXISTS ultimate_jobs_job_archive_children;",
        ),
    ]
