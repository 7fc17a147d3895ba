"""Usage samples per round and their hourly/daily rollups (GPU-seconds), recomputed idempotently."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Sum
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from scheduling.models import UsageRollup, UsageSample, Workload
from scheduling.selectors.retention import pruned_before

from .capacity import lock_capacity

RESOLUTIONS = (
    (UsageRollup.Resolution.HOUR, TruncHour, timedelta(hours=1)),
    (UsageRollup.Resolution.DAY, TruncDay, timedelta(days=1)),
)


def _period_floor(moment: datetime, step: timedelta) -> datetime:
    local = timezone.localtime(moment)
    if step >= timedelta(days=1):
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    return local.replace(minute=0, second=0, microsecond=0)


@transaction.atomic
def refresh_rollups(start: datetime, end: datetime) -> int:
    """Rebuild the hour and day rollups of every period touching [start, end]; returns rows written.

    A rollup row sums every source's samples of its period, so two sources' scrapes (or two rounds) rebuild
    the same rows: without the lock, the second's insert met the first's committed rows on the unique
    constraint (issue 36, Medium 10). Under it each rebuild deletes what the one before wrote.

    Periods that began before the last prune's cutoff are left as they are: their raw samples are gone (or
    partly gone), and a rebuild from what is left would shrink the record (services/retention.py)."""
    lock_capacity("usage-rollups")  # until the transaction ends: one rebuild at a time
    pruned = pruned_before()
    written = 0
    for resolution, trunc, step in RESOLUTIONS:
        low, high = _period_floor(start, step), _period_floor(end, step) + step
        if pruned is not None:
            low = max(low, _period_ceil(pruned, step))
        if low >= high:
            continue
        totals = (
            UsageSample.objects.filter(taken_at__gte=low, taken_at__lt=high)
            .annotate(period=trunc("taken_at"))
            .values("period", "orchestrator_id", "team_id")
            .annotate(
                total=Sum(F("gpus_total") * F("interval_s")),
                allocated=Sum(F("gpus_allocated") * F("interval_s")),
                busy=Sum(F("gpus_busy") * F("interval_s")),
                pending=Sum(F("gpus_pending") * F("interval_s")),
                unavailable=Sum(F("gpus_unavailable") * F("interval_s")),
                planned=Sum(F("gpus_planned") * F("interval_s")),
                covered=Sum("interval_s"),
            )
        )
        rows = {
            (row["period"], row["orchestrator_id"], row["team_id"]): UsageRollup(
                resolution=resolution,
                period_start=row["period"],
                orchestrator_id=row["orchestrator_id"],
                team_id=row["team_id"],
                gpu_s_total=row["total"] or 0,
                gpu_s_allocated=row["allocated"] or 0,
                gpu_s_busy=row["busy"],
                gpu_s_pending=row["pending"] or 0,
                gpu_s_unavailable=row["unavailable"] or 0,
                gpu_s_planned=row["planned"] or 0,
                covered_s=row["covered"] or 0,
            )
            for row in totals
        }
        _add_unsampled_jobs(rows, resolution, step, low, high)
        rows = list(rows.values())
        UsageRollup.objects.filter(resolution=resolution, period_start__gte=low, period_start__lt=high).delete()
        UsageRollup.objects.bulk_create(rows, batch_size=2000)
        written += len(rows)
    return written


def _add_unsampled_jobs(rows: dict, resolution: str, step: timedelta, low: datetime, high: datetime) -> None:
    """Allocated GPU-seconds of finished jobs no scrape saw running, from Slurm accounting (services/accounting.py):
    a job shorter than a round is in no sample. A job a scrape saw running holds its nodes (``Workload.nodes``,
    filled by ingest) and is counted by the samples already; accounting never fills them, so ``nodes == []``
    marks the unsampled ones. Added to the team's row and to the orchestrator's pool row of each period."""
    jobs = Workload.objects.filter(
        orchestrator__accounting_source__isnull=False,
        nodes=[],
        started_at__lt=high,
        finished_at__gt=low,
    ).values_list("orchestrator_id", "team_id", "gang_size", "gpus_per_member", "started_at", "finished_at")
    for orchestrator_id, team_id, gang, per_member, started, finished in jobs:
        period = _period_floor(started, step)
        while period < finished and period < high:
            seconds = (min(finished, period + step) - max(started, period)).total_seconds()
            if period >= low and seconds > 0:
                for team in {team_id, None}:
                    key = (period, orchestrator_id, team)
                    if key not in rows:
                        rows[key] = UsageRollup(
                            resolution=resolution, period_start=period, orchestrator_id=orchestrator_id, team_id=team
                        )
                    rows[key].gpu_s_allocated += gang * per_member * seconds
            period = _next_period(period, step)


def _period_ceil(moment: datetime, step: timedelta) -> datetime:
    """The start of the first whole period at or after ``moment``."""
    floor = _period_floor(moment, step)
    return floor if floor == moment else _next_period(floor, step)


def _next_period(period: datetime, step: timedelta) -> datetime:
    """The next hour, or the next local day (a day is 23 or 25 hours across a DST change)."""
    return _period_floor(period + step + timedelta(hours=2), step) if step >= timedelta(days=1) else period + step

