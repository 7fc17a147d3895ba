"""Raw scrape rows are kept for the period an admin sets (``HistoryRetention``), then pruned in batches.

What a round writes (the tables that grow with every 30-second round) is pruned; the hourly and daily usage
rollups never are, and pages read them for periods older than the raw rows kept (``selectors/usage.py``).
Each batch is its own short transaction, so a prune of a month of rows never holds a long lock or a long
transaction against the rounds writing beside it.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import models, transaction

from scheduling.models import (
    CollectorRun,
    EnforcementRun,
    FragmentationSample,
    HistoryRetention,
    UsageSample,
)
from scheduling.selectors.retention import SINGLETON, raw_kept_since

from .audit import save_audited

PRUNE_BATCH = 5000


@dataclass(frozen=True)
class RawTable:
    """A table a round appends to, and the column saying when its row was taken."""

    model: type[models.Model]
    taken: str


# Every table that grows per round. UsageRollup is deliberately absent: rollups are the record.
RAW_TABLES = (
    RawTable(UsageSample, "taken_at"),
    RawTable(FragmentationSample, "taken_at"),
    RawTable(CollectorRun, "started_at"),
    RawTable(EnforcementRun, "started_at"),  # its outcomes go with it (CASCADE)
)


@transaction.atomic
def set_raw_days(days: object, *, by, reason: str) -> HistoryRetention:
    """An admin's new period, validated (``raw_days`` names the rule) and saved with who and why."""
    row = HistoryRetention.objects.select_for_update().filter(pk=SINGLETON).first() or HistoryRetention(pk=SINGLETON)
    row.raw_days = days
    save_audited(row, by=by, reason=reason)
    return row


def prune_raw(now: datetime | None = None, batch: int = PRUNE_BATCH) -> dict[str, int]:
    """Delete raw rows older than the retention period, ``batch`` rows per transaction; rows deleted per table.

    The cutoff is recorded first: a rollup rebuild running meanwhile already leaves the periods before it alone.
    """
    cutoff = raw_kept_since(now)
    _record_cutoff(cutoff)
    return {table.model._meta.model_name: _prune_table(table, cutoff, batch) for table in RAW_TABLES}


def _record_cutoff(cutoff: datetime) -> None:
    row, created = HistoryRetention.objects.get_or_create(pk=SINGLETON, defaults={"pruned_before": cutoff})
    if not created and (row.pruned_before is None or row.pruned_before < cutoff):
        # Only forwards, and not a change of policy: an UPDATE, so no history row.
        HistoryRetention.objects.filter(pk=SINGLETON).update(pruned_before=cutoff)


def _prune_table(table: RawTable, cutoff: datetime, batch: int) -> int:
    manager = table.model._default_manager
    # No ORDER BY: any batch of old rows will do, and the oldest sit first in an append-only table's heap.
    older = manager.filter(**{f"{table.taken}__lt": cutoff}).order_by().values_list("pk", flat=True)
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(older[:batch])
            if not ids:
                return deleted
            manager.filter(pk__in=ids).delete()
        deleted += len(ids)
