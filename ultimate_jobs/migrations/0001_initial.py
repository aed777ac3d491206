"""Every table of ultimate_jobs, as one initial migration.

The migrations written while the project was built were squashed into this one
before the first release (no deployment had applied them). Later schema changes
are new files numbered in order, each depending on the one before it (a test
checks this).
"""

import django.db.models.deletion
import django.db.models.functions.comparison
import django.db.models.functions.datetime
from django.db import migrations, models

import ultimate_jobs.ground.ids


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="LeaderLease",
            fields=[
                (
                    "role",
                    models.CharField(max_length=63, primary_key=True, serialize=False),
                ),
                ("holder", models.CharField(max_length=200)),
                ("term", models.BigIntegerField(default=1)),
                ("acquired_at", models.DateTimeField()),
                ("renewed_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
            ],
            options={
                "db_table": "ultimate_jobs_leader_lease",
            },
        ),
        migrations.CreateModel(
            name="QueuePause",
            fields=[
                (
                    "queue",
                    models.CharField(max_length=63, primary_key=True, serialize=False),
                ),
                (
                    "paused_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                (
                    "paused_by",
                    models.CharField(blank=True, db_default="", max_length=255),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_queue_pause",
            },
        ),
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("key", models.CharField(max_length=200, unique=True)),
                (
                    "job",
                    models.CharField(
                        help_text="the name of a registered job", max_length=200
                    ),
                ),
                ("input", models.JSONField(blank=True, default=dict)),
                (
                    "cron",
                    models.CharField(
                        help_text="5 fields, e.g. */5 * * * *", max_length=200
                    ),
                ),
                (
                    "tz",
                    models.CharField(
                        help_text="an IANA name, e.g. Europe/Paris",
                        max_length=64,
                        verbose_name="time zone",
                    ),
                ),
                (
                    "catch_up",
                    models.CharField(
                        choices=[
                            ("skip", "Skip"),
                            ("run-once", "Run Once"),
                            ("run-all", "Run All"),
                        ],
                        default="skip",
                        max_length=16,
                    ),
                ),
                ("max_catch_up", models.PositiveIntegerField(default=10)),
                (
                    "description",
                    models.CharField(blank=True, default="", max_length=255),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "db_table": "ultimate_jobs_schedule",
                "ordering": ("key",),
            },
        ),
        migrations.CreateModel(
            name="TaskWatermark",
            fields=[
                (
                    "key",
                    models.CharField(max_length=255, primary_key=True, serialize=False),
                ),
                ("kind", models.CharField(max_length=16)),
                ("name", models.CharField(max_length=200)),
                ("spec", models.CharField(blank=True, db_default="", max_length=300)),
                ("last_occurrence", models.DateTimeField()),
                ("last_fired_occurrence", models.DateTimeField(blank=True, null=True)),
                ("last_fired_at", models.DateTimeField(blank=True, null=True)),
                ("fires", models.BigIntegerField(db_default=0)),
                ("paused", models.BooleanField(db_default=False)),
                ("paused_at", models.DateTimeField(blank=True, null=True)),
                (
                    "paused_by",
                    models.CharField(blank=True, db_default="", max_length=255),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
            ],
            options={
                "verbose_name": "task fire",
                "db_table": "ultimate_jobs_task_watermark",
                "ordering": ("key",),
            },
        ),
        migrations.CreateModel(
            name="WebhookEndpointState",
            fields=[
                (
                    "endpoint_id",
                    models.CharField(max_length=200, primary_key=True, serialize=False),
                ),
                ("consecutive_failures", models.IntegerField(default=0)),
                ("disabled_at", models.DateTimeField(blank=True, null=True)),
                (
                    "disabled_reason",
                    models.CharField(blank=True, db_default="", max_length=500),
                ),
                ("enabled_at", models.DateTimeField(blank=True, null=True)),
                (
                    "enabled_by",
                    models.CharField(blank=True, db_default="", max_length=255),
                ),
                ("last_attempt_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "ultimate_jobs_webhook_endpoint",
                "ordering": ("endpoint_id",),
            },
        ),
        migrations.CreateModel(
            name="Worker",
            fields=[
                (
                    "id",
                    models.CharField(max_length=200, primary_key=True, serialize=False),
                ),
                ("host", models.CharField(max_length=255)),
                ("pid", models.IntegerField()),
                ("started_at", models.DateTimeField()),
                ("queues", models.JSONField(default=list)),
                ("slots", models.IntegerField()),
                ("in_flight", models.JSONField(default=list)),
                ("heartbeat_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
            ],
            options={
                "db_table": "ultimate_jobs_worker",
                "ordering": ("id",),
            },
        ),
        migrations.CreateModel(
            name="BackfillLedger",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                ("checksum", models.CharField(max_length=64)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                (
                    "app_version",
                    models.CharField(blank=True, db_default="", max_length=200),
                ),
                ("job_id", models.UUIDField(blank=True, null=True)),
                ("forced", models.BooleanField(default=False)),
                ("rows", models.BigIntegerField(default=0)),
                ("batches", models.IntegerField(default=0)),
                ("last_cursor", models.JSONField(blank=True, null=True)),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                ("error", models.TextField(blank=True, db_default="")),
            ],
            options={
                "verbose_name": "backfill pass",
                "verbose_name_plural": "backfill ledger",
                "db_table": "ultimate_jobs_backfill",
                "ordering": ("-id",),
                "indexes": [
                    models.Index(
                        fields=["name", "-id"], name="ultimate_jobs_backfill_name"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("job_id",), name="ultimate_jobs_backfill_job"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Event",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                ("payload", models.JSONField(default=dict)),
                ("tenant_id", models.CharField(blank=True, max_length=200, null=True)),
                (
                    "published_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                ("expires_at", models.DateTimeField()),
            ],
            options={
                "db_table": "ultimate_jobs_event",
                "ordering": ("id",),
                "indexes": [
                    models.Index(
                        fields=["name", "published_at"], name="ultimate_jobs_event_name"
                    ),
                    models.Index(
                        fields=["expires_at"], name="ultimate_jobs_event_expiry"
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="Job",
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
            ],
            options={
                "db_table": "ultimate_jobs_job",
                "ordering": ("-id",),
                "indexes": [
                    models.Index(
                        models.F("queue"),
                        models.OrderBy(models.F("priority"), descending=True),
                        models.F("run_at"),
                        models.F("id"),
                        condition=models.Q(("state", "ready")),
                        name="ultimate_jobs_job_ready",
                    ),
                    models.Index(
                        condition=models.Q(("state__in", ("delayed", "suspended"))),
                        fields=["queue", "run_at"],
                        name="ultimate_jobs_job_waiting",
                    ),
                    models.Index(
                        condition=models.Q(("state", "running")),
                        fields=["lease_expires_at"],
                        name="ultimate_jobs_job_leased",
                    ),
                    models.Index(
                        fields=["state", "finished_at"],
                        name="ultimate_jobs_job_state_age",
                    ),
                    models.Index(
                        fields=["name", "state", "finished_at"],
                        name="ultimate_jobs_job_name_age",
                    ),
                    models.Index(fields=["tenant_id"], name="ultimate_jobs_job_tenant"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        models.F("name"),
                        django.db.models.functions.comparison.Coalesce(
                            "tenant_id", models.Value("")
                        ),
                        models.F("idempotency_key"),
                        condition=models.Q(
                            ("state__in", ("ready", "delayed", "running", "suspended"))
                        ),
                        name="ultimate_jobs_job_live_key",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("priority__gte", -100), ("priority__lte", 100)
                        ),
                        name="ultimate_jobs_job_priority_range",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="JobCounter",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                (
                    "tier",
                    models.IntegerField(
                        choices=[(60, "Minute"), (300, "Five Minutes"), (3600, "Hour")]
                    ),
                ),
                ("bucket", models.DateTimeField()),
                ("done", models.BigIntegerField(db_default=0)),
                ("retried", models.BigIntegerField(db_default=0)),
                ("failed", models.BigIntegerField(db_default=0)),
                ("dead", models.BigIntegerField(db_default=0)),
                ("duration", models.FloatField(db_default=0.0)),
            ],
            options={
                "db_table": "ultimate_jobs_counter",
                "ordering": ("-bucket", "name"),
                "indexes": [
                    models.Index(
                        fields=["tier", "bucket"], name="ultimate_jobs_counter_age"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name", "tier", "bucket"),
                        name="ultimate_jobs_counter_bucket",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Lease",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("key", models.CharField(max_length=1000)),
                ("slot", models.IntegerField()),
                ("name", models.CharField(max_length=200)),
                ("holder", models.UUIDField()),
                ("job_id", models.UUIDField()),
                ("taken_from", models.UUIDField(blank=True, null=True)),
                ("acquired_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
            ],
            options={
                "db_table": "ultimate_jobs_lease",
                "ordering": ("key", "slot"),
                "indexes": [
                    models.Index(fields=["holder"], name="ultimate_jobs_lease_holder"),
                    models.Index(fields=["name"], name="ultimate_jobs_lease_name"),
                    models.Index(
                        fields=["expires_at"], name="ultimate_jobs_lease_expiry"
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("key", "slot"), name="ultimate_jobs_lease_slot"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="OutboxMessage",
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
                ("input", models.JSONField(default=dict)),
                ("tenant_id", models.CharField(blank=True, max_length=200, null=True)),
                ("idempotency_key", models.CharField(max_length=512)),
                ("max_attempts", models.IntegerField(default=1)),
                ("run_at", models.DateTimeField()),
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
                (
                    "staged_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
                ("staged_tx", models.BigIntegerField()),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("claimed_by", models.CharField(blank=True, max_length=200, null=True)),
                ("claims", models.IntegerField(db_default=0)),
                ("published_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "ultimate_jobs_outbox",
                "ordering": ("staged_at", "id"),
                "indexes": [
                    models.Index(
                        condition=models.Q(("published_at__isnull", True)),
                        fields=["staged_at", "id"],
                        name="ultimate_jobs_outbox_due",
                    ),
                    models.Index(
                        condition=models.Q(("published_at__isnull", True)),
                        fields=["staged_tx", "staged_at", "id"],
                        name="ultimate_jobs_outbox_tx",
                    ),
                    models.Index(
                        condition=models.Q(("published_at__isnull", False)),
                        fields=["published_at"],
                        name="ultimate_jobs_outbox_published",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="WebhookDelivery",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("endpoint_id", models.CharField(max_length=200)),
                ("event_id", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("job_id", models.UUIDField(blank=True, null=True)),
                ("attempt", models.IntegerField(default=0)),
                ("tenant_id", models.CharField(blank=True, max_length=200, null=True)),
                ("ok", models.BooleanField()),
                ("status", models.IntegerField(blank=True, null=True)),
                ("error", models.CharField(blank=True, db_default="", max_length=500)),
                ("retry_after", models.FloatField(blank=True, null=True)),
                ("duration", models.FloatField(default=0.0)),
                (
                    "attempted_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_webhook_delivery",
                "ordering": ("-id",),
                "indexes": [
                    models.Index(
                        fields=["endpoint_id", "id"], name="ultimate_jobs_webhook_ep"
                    ),
                    models.Index(
                        fields=["attempted_at"], name="ultimate_jobs_webhook_at"
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="JobStep",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("step", "Step"),
                            ("atomic", "Atomic"),
                            ("sleep", "Sleep"),
                            ("event", "Event"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("done", "Done"),
                            ("waiting", "Waiting"),
                            ("timed_out", "Timed Out"),
                        ],
                        max_length=16,
                    ),
                ),
                ("output", models.JSONField(blank=True, null=True)),
                ("attempt", models.IntegerField(default=0)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("wake_at", models.DateTimeField(blank=True, null=True)),
                ("event", models.CharField(blank=True, db_default="", max_length=200)),
                ("match", models.JSONField(blank=True, null=True)),
                ("event_id", models.BigIntegerField(blank=True, null=True)),
                ("woken", models.BooleanField(db_default=False)),
                ("archived", models.BooleanField(db_default=False)),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="steps",
                        to="ultimate_jobs.job",
                    ),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_step",
                "ordering": ("id",),
                "indexes": [
                    models.Index(
                        condition=models.Q(("kind", "event"), ("status", "waiting")),
                        fields=["event"],
                        name="ultimate_jobs_step_waiting",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("archived", False)),
                        fields=("job", "name"),
                        name="ultimate_jobs_step_name",
                    )
                ],
            },
        ),
        # S8: a job's steps go with it, whichever way the job row is deleted (the
        # named SQL, the ORM, the retention purge). Django 5.2 cannot declare a
        # database-level cascade, so the model's key has no constraint of its own.
        migrations.RunSQL(
            sql=(
                "ALTER TABLE ultimate_jobs_step ADD CONSTRAINT ultimate_jobs_step_job_fk "
                "FOREIGN KEY (job_id) REFERENCES ultimate_jobs_job (id) ON DELETE CASCADE"
            ),
            reverse_sql=(
                "ALTER TABLE ultimate_jobs_step DROP CONSTRAINT ultimate_jobs_step_job_fk"
            ),
        ),
    ]
