"""One FragmentationSample per collection round, a backfill for history before them, and pruning."""

from bisect import bisect_left
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.models import FragmentationSample
from scheduling.selectors.fragmentation_trend import (
    FragmentationPoint,
    fleet_fragmentation,
    replayed_fragmentation,
    trend_moments,
)


def _row(point: FragmentationPoint, replayed: bool) -> FragmentationSample:
    return FragmentationSample(
        taken_at=point.at,
        gpus_free=point.free,
        gpus_fragmented=point.fragmented,
        largest_gang=point.largest_gang,
        placeable={str(size): count for size, count in sorted(point.placeable.items())},
        replayed=replayed,
    )


def record_fragmentation_sample(now: datetime | None = None) -> FragmentationSample | None:
    """Store the fleet's fragmentation as the round sees it; a second call within half a round (a retried
    task, two beat schedulers) stores nothing, so the trend keeps one row per round."""
    now = now or timezone.now()
    half_round = timedelta(seconds=settings.GPUPORTAL_ROUND_SECONDS / 2)
    if FragmentationSample.objects.filter(taken_at__gt=now - half_round, taken_at__lte=now + half_round).exists():
        return None
    sample = _row(fleet_fragmentation(now), replayed=False)
    FragmentationSample.objects.bulk_create([sample], ignore_conflicts=True)
    return sample


@transaction.atomic
def backfill_fragmentation(since: datetime, until: datetime, step: timedelta) -> int:
    """Store replayed samples every ``step`` over [since, until] where no sample lies within half a step
    (history from before rounds stored samples); returns rows written. Safe to run again."""
    if until <= since or step <= timedelta(0):
        return 0
    points = int((until - since) / step) + 1
    moments = trend_moments(since, since + step * (points - 1), points)
    stored = list(
        FragmentationSample.objects.filter(taken_at__gte=since - step, taken_at__lte=until + step)
        .order_by("taken_at")
        .values_list("taken_at", flat=True)
    )
    missing = [m for m in moments if not _near(stored, m, step / 2)]
    rows = [_row(point, replayed=True) for point in replayed_fragmentation(missing)]
    FragmentationSample.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)
    return len(rows)


def _near(ascending: list[datetime], moment: datetime, within: timedelta) -> bool:
    index = bisect_left(ascending, moment - within)
    return index < len(ascending) and ascending[index] < moment + within

