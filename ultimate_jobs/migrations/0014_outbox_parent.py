"""A child spawned onto another alias keeps its parent (issue 28, SPEC S10, S11, Q1).

``run.spawn`` stages a child whose queue lives on another alias in the parent's
outbox; the row now carries the parent's id, and the relay publishes the child with
``parent_id`` set on the target alias, so the parent's children are listed there and a
settle there can wake the parent (runtime/parents.py). Nullable: every other staged
row, and rows staged by an earlier version, have none.

Reverse: drops the column (a row still staged then is published without its parent).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0013_worker_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="outboxmessage",
            name="parent_id",
            field=models.UUIDField(blank=True, null=True),
        ),
    ]
