"""How long the raw scrape rows are kept: one row an admin edits, audited (who and why in its history).

A 30-second round writes a usage sample per orchestrator and team, a fragmentation sample, a collector run per
orchestrator and a governance round: at 10,000 GPUs and 200 teams about 26 million rows a month
(docs/performance.md). Those raw rows are pruned after ``raw_days``; the hourly and daily usage rollups are
never pruned, and pages and reports read them for anything older (``selectors/usage.py``).
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

# The weekly capacity report (Mondays, for the last full week) reads that week's scrapes: a shorter period would
# prune them before the report is built. Beyond a year raw rows only cost room: the rollups are the record.
MIN_RAW_DAYS = 8
MAX_RAW_DAYS = 366
RAW_DAYS_RULE = (
    f"must be a whole number of days from {MIN_RAW_DAYS} to {MAX_RAW_DAYS}: the weekly capacity report reads the "
    f"last full week of raw scrapes, and beyond a year the hourly and daily rollups are the record"
)


def default_raw_days() -> int:
    return settings.GPUPORTAL_SAMPLE_RETENTION_DAYS


class HistoryRetention(models.Model):
    """The one retention row (``pk`` 1; ``services/retention.py`` reads and writes it)."""

    raw_days = models.PositiveIntegerField(
        default=default_raw_days,
        help_text=(
            f"Days raw scrape rows (usage and fragmentation samples, collector and governance runs) are kept, "
            f"{MIN_RAW_DAYS}–{MAX_RAW_DAYS}. Hourly and daily rollups are kept for ever."
        ),
    )
    # Raw rows before this moment may be gone (the last prune's cutoff): rollups of earlier periods are never
    # rebuilt from what is left of them (``services/metrics.refresh_rollups``).
    pruned_before = models.DateTimeField(null=True, blank=True, editable=False)
    history = HistoricalRecords(excluded_fields=["pruned_before"])

    class Meta:
        verbose_name = "history retention"
        verbose_name_plural = "history retention"

    def __str__(self) -> str:
        return f"raw scrape rows kept {self.raw_days} days"

    def clean(self) -> None:
        days = self.raw_days  # still the text given when it is no whole number (clean_fields left it)
        if not isinstance(days, int) or isinstance(days, bool) or not MIN_RAW_DAYS <= days <= MAX_RAW_DAYS:
            raise ValidationError({"raw_days": f"raw_days {RAW_DAYS_RULE}; got {str(days)[:40]!r}."})
