"""What operators may not see, kept with the row (issue 27, SPEC B5), and the
fingerprint of a failed attempt (P10), and the archive's per-queue counts (Q2, P7).

``redact`` holds the input paths the job declared when it was enqueued, ``shown_key``
the idempotency key with its hidden values replaced (NULL when it holds none), on the
hot table, the outbox and the partitioned archive (unmanaged: ``RunSQL``, and the
model's state told separately).
"""

from django.db import migrations, models

from ultimate_jobs.observability.triage import FUNCTION_SQL

# P10: the fingerprint of a stored error, kept in a column of both tables: the hot
# table's by a trigger that runs only when a row's error is written non-empty (or
# emptied), never on an enqueue's insert of an empty one (its WHEN is checked without
# calling the function); the archive's is copied by the move (archive_columns). The
# rows already there are filled here. A partial index over the rows that hold one.
TRIAGE_SQL = """
CREATE FUNCTION ultimate_jobs_fingerprint_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.fingerprint := ultimate_jobs_fingerprint(NEW.last_error);
    RETURN NEW;
END
$fn$;
CREATE TRIGGER ultimate_jobs_job_fingerprint
    BEFORE INSERT OR UPDATE OF last_error ON ultimate_jobs_job
    FOR EACH ROW
    WHEN (NEW.last_error <> '' OR NEW.fingerprint IS NOT NULL)
    EXECUTE FUNCTION ultimate_jobs_fingerprint_row();
UPDATE ultimate_jobs_job SET fingerprint = ultimate_jobs_fingerprint(last_error)
 WHERE last_error <> '';
UPDATE ultimate_jobs_job_archive
   SET fingerprint = ultimate_jobs_fingerprint(last_error)
 WHERE last_error <> '';
CREATE INDEX ultimate_jobs_job_fingerprint
    ON ultimate_jobs_job (fingerprint, state, finished_at)
    WHERE fingerprint IS NOT NULL;
CREATE INDEX ultimate_jobs_job_archive_fingerprint
    ON ultimate_jobs_job_archive (fingerprint, state, finished_at)
    WHERE fingerprint IS NOT NULL;
"""

# Q2, P7: the archive's counts per (queue, state, day), from the rows it holds now;
# from here on the archive statements keep them (sql/archive.sql).
COUNTS_SQL = """
INSERT INTO ultimate_jobs_archive_count (queue, state, day, jobs)
SELECT archive.queue, archive.state, (archive.finished_at AT TIME ZONE 'UTC')::date,
       count(*)
  FROM ultimate_jobs_job_archive AS archive
 GROUP BY 1, 2, 3;
"""

TRIAGE_REVERSE = """
DROP INDEX IF EXISTS ultimate_jobs_job_archive_fingerprint;
DROP INDEX IF EXISTS ultimate_jobs_job_fingerprint;
DROP TRIGGER IF EXISTS ultimate_jobs_job_fingerprint ON ultimate_jobs_job;
DROP FUNCTION IF EXISTS ultimate_jobs_fingerprint_row();
DROP FUNCTION IF EXISTS ultimate_jobs_fingerprint(text);
"""

HISTORY_SQL = """
ALTER TABLE ultimate_jobs_job_archive ADD COLUMN redact jsonb NULL;
ALTER TABLE ultimate_jobs_job_archive ADD COLUMN shown_key varchar(512) NULL;
ALTER TABLE ultimate_jobs_job_archive ADD COLUMN fingerprint varchar(16) NULL;
CREATE INDEX ultimate_jobs_job_archive_shown_key
    ON ultimate_jobs_job_archive (shown_key varchar_pattern_ops)
    WHERE shown_key IS NOT NULL;
"""

HISTORY_REVERSE = """
DROP INDEX IF EXISTS ultimate_jobs_job_archive_shown_key;
ALTER TABLE ultimate_jobs_job_archive DROP COLUMN IF EXISTS fingerprint;
ALTER TABLE ultimate_jobs_job_archive DROP COLUMN IF EXISTS shown_key;
ALTER TABLE ultimate_jobs_job_archive DROP COLUMN IF EXISTS redact;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0007_archive"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(sql=HISTORY_SQL, reverse_sql=HISTORY_REVERSE)
            ],
            state_operations=[
                migrations.AddField(
                    model_name="jobarchive",
                    name="redact",
                    field=models.JSONField(blank=True, null=True),
                ),
                migrations.AddField(
                    model_name="jobarchive",
                    name="shown_key",
                    field=models.CharField(blank=True, max_length=512, null=True),
                ),
                migrations.AddField(
                    model_name="jobarchive",
                    name="fingerprint",
                    field=models.CharField(
                        blank=True, editable=False, max_length=16, null=True
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="job",
            name="fingerprint",
            field=models.CharField(
                blank=True, editable=False, max_length=16, null=True
            ),
        ),
        migrations.RunSQL(sql=[FUNCTION_SQL, TRIAGE_SQL], reverse_sql=TRIAGE_REVERSE),
        migrations.AddField(
            model_name="job",
            name="redact",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="shown_key",
            field=models.CharField(blank=True, max_length=512, null=True),
        ),
        migrations.AddField(
            model_name="outboxmessage",
            name="redact",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="outboxmessage",
            name="shown_key",
            field=models.CharField(blank=True, max_length=512, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("shown_key__isnull", False)),
                fields=["shown_key"],
                name="ultimate_jobs_job_shown_key",
                opclasses=("varchar_pattern_ops",),
            ),
        ),
        migrations.CreateModel(
            name="ArchiveCount",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("queue", models.CharField(max_length=63)),
                ("state", models.CharField(max_length=16)),
                ("day", models.DateField()),
                ("jobs", models.BigIntegerField()),
            ],
            options={
                "db_table": "ultimate_jobs_archive_count",
                "indexes": [
                    models.Index(
                        fields=["state", "queue", "day"],
                        name="ultimate_jobs_archive_count_at",
                    )
                ],
            },
        ),
        migrations.RunSQL(sql=COUNTS_SQL, reverse_sql=migrations.RunSQL.noop),
    ]
