# One governance round at a time (EnforcementRun.heartbeat_at: the lease's sign of life) and each object's
# state per round (EnforcementOutcome.objects, read_back), so a round cut short fails only what it failed.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0021_admission_bypassed"),
    ]

    operations = [
        migrations.AddField(
            model_name="enforcementrun",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="enforcementoutcome",
            name="object_ids",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="enforcementoutcome",
            name="read_back",
            field=models.BooleanField(default=True),
        ),
    ]
