"""Queues on several databases (Q1): the receipts of outbox rows a relay delivered
into this alias from another one, keyed on the staged row's id, so a relay killed
between the delivery and its mark at the source delivers nothing twice."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0004_console"),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboxReceipt",
            fields=[
                (
                    "id",
                    models.UUIDField(editable=False, primary_key=True, serialize=False),
                ),
                (
                    "received_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now()
                    ),
                ),
            ],
            options={
                "db_table": "ultimate_jobs_outbox_receipt",
                "indexes": [
                    models.Index(
                        fields=["received_at"], name="ultimate_jobs_receipt_received"
                    )
                ],
            },
        ),
    ]
