"""The job names a worker declares, in its registry row (issue 30).

A worker claims only the names its code declares (rolling deploys), so a due job whose
name no live worker serving its queue declares waits in silence. The worker writes its
names once, when it registers (not at every heartbeat): the dashboard names such jobs.
NULL: not recorded (a worker of an earlier version, or one declaring more names than
the row keeps), read as "may serve any name", so it never causes a false warning.

Reverse: drops the column.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0012_fan_in_lock_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="names",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
