# Audit reasons are stored whole (SIMPLE_HISTORY_HISTORY_CHANGE_REASON_USE_TEXT_FIELD): varchar(100) made a
# longer decision comment fail on PostgreSQL, losing the decision.

from django.db import migrations, models

HISTORICAL_MODELS = (
    "historicalfleethost",
    "historicalnode",
    "historicalnodealias",
    "historicalorchestrator",
    "historicalpoolpolicy",
    "historicalqueue",
    "historicalquotagrant",
    "historicalquotarequest",
    "historicalrebalanceplan",
    "historicalteam",
)


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0010_orphaned_work"),
    ]

    operations = [
        migrations.AlterField(model_name=name, name="history_change_reason", field=models.TextField(null=True))
        for name in HISTORICAL_MODELS
    ]
