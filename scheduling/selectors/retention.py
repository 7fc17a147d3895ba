"""The raw-history retention as pages and rollup rebuilds read it (``services/retention.py`` writes it)."""

from datetime import datetime, timedelta

from django.utils import timezone

from scheduling.models import HistoryRetention

SINGLETON = 1


def current() -> HistoryRetention:
    """The retention row, or an unsaved one with the default period (``GPUPORTAL_SAMPLE_RETENTION_DAYS``)."""
    return HistoryRetention.objects.filter(pk=SINGLETON).first() or HistoryRetention(pk=SINGLETON)


def raw_days() -> int:
    return current().raw_days


def raw_kept_since(now: datetime | None = None) -> datetime:
    """Raw rows from this moment on are all still there; anything older is read from rollups."""
    return (now or timezone.now()) - timedelta(days=raw_days())


def pruned_before() -> datetime | None:
    """The last prune's cutoff: raw rows before it may be gone (None: nothing pruned yet)."""
    return HistoryRetention.objects.filter(pk=SINGLETON).values_list("pruned_before", flat=True).first()
