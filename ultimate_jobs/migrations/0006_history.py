"""Partitioned history of finished jobs (issue 18 item 2, SPEC Q2).

``ultimate_jobs_job_history`` has the job row's columns, ``trail`` (the job's steps,
attempts and run-log lines as JSON) and ``moved_at``; it is partitioned by range of
``finished_at``, one partition per UTC day, named ``ultimate_jobs_job_history_pYYYYMMDD``.
There is no DEFAULT partition: attaching a day would then scan it under a lock. Two
functions manage the days: ``ultimate_jobs_history_ensure(first, last)`` creates the
missing days in a range (idempotent, safe against a concurrent caller) and
``ultimate_jobs_history_drop_before(day)`` drops every whole day before ``day``
(answering how many rows they held).
Django cannot declare a partitioned table, so the model is unmanaged and the table is
``RunSQL``; the indexes are the parent's, so every partition gets them.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

import ultimate_jobs.ground.ids

HISTORY_SQL = """
CREATE TABLE ultimate_jobs_job_history (
    id uuid NOT NULL,
    run_id uuid NOT NULL,
    name varchar(200) NOT NULL,
    queue varchar(63) NOT NULL,
    priority smallint NOT NULL,
    state varchar(16) NOT NULL,
    input jsonb NOT NULL,
    tenant_id varchar(200),
    idempotency_key varchar(512) NOT NULL,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz NOT NULL,
    lease_owner uuid,
    lease_expires_at timestamptz,
    worker_id varchar(200) NOT NULL,
    last_error text NOT NULL,
    error_code varchar(64) NOT NULL,
    stop_reason varchar(32) NOT NULL,
    progress jsonb,
    result jsonb,
    correlation_id varchar(255) NOT NULL,
    enqueued_by varchar(255) NOT NULL,
    concurrency_key varchar(1000),
    trail jsonb NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, finished_at)
) PARTITION BY RANGE (finished_at);
CREATE INDEX ultimate_jobs_job_history_name_age
    ON ultimate_jobs_job_history (name, state, finished_at);
CREATE INDEX ultimate_jobs_job_history_state_age
    ON ultimate_jobs_job_history (state, finished_at);
CREATE INDEX ultimate_jobs_job_history_tenant
    ON ultimate_jobs_job_history (tenant_id);
CREATE INDEX ultimate_jobs_job_history_key
    ON ultimate_jobs_job_history (idempotency_key varchar_pattern_ops);

CREATE FUNCTION ultimate_jobs_history_ensure(first_day date, last_day date)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date := first_day;
    made integer := 0;
    part text;
BEGIN
    WHILE day <= last_day LOOP
        part := 'ultimate_jobs_job_history_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(part) IS NULL THEN
            BEGIN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF ultimate_jobs_job_history '
                    'FOR VALUES FROM (%L) TO (%L)',
                    part,
                    day::timestamp AT TIME ZONE 'UTC',
                    (day + 1)::timestamp AT TIME ZONE 'UTC'
                );
                made := made + 1;
            EXCEPTION WHEN duplicate_table OR unique_violation THEN
                NULL;  -- a concurrent caller made it first
            END;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN made;
END
$$;

CREATE FUNCTION ultimate_jobs_history_drop_before(horizon date)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    part text;
    counted bigint;
    dropped bigint := 0;
BEGIN
    FOR part IN
        SELECT child.relname
          FROM pg_inherits AS link
          JOIN pg_class AS child ON child.oid = link.inhrelid
         WHERE link.inhparent = 'ultimate_jobs_job_history'::regclass
           AND child.relname ~ '^ultimate_jobs_job_history_p[0-9]{8}$'
           AND to_date(right(child.relname, 8), 'YYYYMMDD') < horizon
         ORDER BY child.relname
    LOOP
        EXECUTE format('SELECT count(*) FROM %I', part) INTO counted;
        EXECUTE format('DROP TABLE IF EXISTS %I', part);
        dropped := dropped + counted;
    END LOOP;
    RETURN dropped;
END
$$;
"""

HISTORY_REVERSE = """
DROP FUNCTION IF EXISTS ultimate_jobs_history_drop_before(date);
DROP FUNCTION IF EXISTS ultimate_jobs_history_ensure(date, date);
DROP TABLE IF EXISTS ultimate_jobs_job_history;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0005_outbox_receipt"),
    ]

    operations = [
        migrations.RunSQL(sql=HISTORY_SQL, reverse_sql=HISTORY_REVERSE),
        migrations.CreateModel(
            name="JobHistory",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=ultimate_jobs.ground.ids.uuid7,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "run_id",
                    models.UUIDField(
                        default=ultimate_jobs.ground.ids.uuid7, editable=False
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                ("queue", models.CharField(default="default", max_length=63)),
                ("priority", models.SmallIntegerField(default=0)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("ready", "Ready"),
                            ("delayed", "Delayed"),
                            ("running", "Running"),
                            ("suspended", "Suspended"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                            ("dead", "Dead"),
                            ("cancelled", "Cancelled"),
                        ],
                        default="ready",
                        max_length=16,
                    ),
                ),
                ("input", models.JSONField(default=dict)),
                ("tenant_id", models.CharField(blank=True, max_length=200, null=True)),
                ("idempotency_key", models.CharField(max_length=512)),
                ("attempt", models.IntegerField(default=0)),
                ("max_attempts", models.IntegerField(default=1)),
                (
                    "run_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("lease_owner", models.UUIDField(blank=True, null=True)),
                ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                (
                    "worker_id",
                    models.CharField(blank=True, db_default="", max_length=200),
                ),
                ("last_error", models.TextField(blank=True, db_default="")),
                (
                    "error_code",
                    models.CharField(blank=True, db_default="", max_length=64),
                ),
                (
                    "stop_reason",
                    models.CharField(blank=True, db_default="", max_length=32),
                ),
                ("progress", models.JSONField(blank=True, null=True)),
                ("result", models.JSONField(blank=True, null=True)),
                (
                    "correlation_id",
                    models.CharField(blank=True, db_default="", max_length=255),
                ),
                (
                    "enqueued_by",
                    models.CharField(blank=True, db_default="", max_length=255),
                ),
                (
                    "concurrency_key",
                    models.CharField(blank=True, max_length=1000, null=True),
                ),
                ("trail", models.JSONField(default=dict)),
                ("moved_at", models.DateTimeField()),
            ],
            options={
                "verbose_name_plural": "job history",
                "db_table": "ultimate_jobs_job_history",
                "ordering": ("-id",),
                "abstract": False,
                "managed": False,
            },
        ),
    ]
