from django.db import models


class TableChange(models.Model):
    """Committed writing statements on one table, counted by PostgreSQL triggers (services/table_changes.py).

    The sum of ``weight`` per table is that table's generation: it grows with every commit that wrote the
    table, whatever wrote it (ORM, ``bulk_update``, raw SQL), and compaction folds rows without changing it.
    """

    table_name = models.CharField(max_length=63, db_index=True)
    weight = models.BigIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.table_name} +{self.weight}"
