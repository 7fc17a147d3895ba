"""Reads for pages, API and /metrics: busy vs allocated GPU-hours, efficiency, idle-allocated hours.

Busy time sits in the same samples and rollups as allocation (``gpus_busy``/``gpu_s_busy``, NULL where no
metrics source measured it); per-job figures live in :class:`WorkloadUtilisation`. Every function issues a
fixed number of queries whatever the fleet size. Efficiency is ``busy / allocated`` over the *measured*
part only (``None`` when nothing was measured), so unmeasured pools do not read as idle.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery, Sum

from scheduling.models import Orchestrator, UsageRollup, UsageSample, WorkloadUtilisation

HOURLY_MAX_SPAN = timedelta(days=31)


@dataclass(frozen=True)
class Efficiency:
    """GPU-hours over a window for one team, user, orchestrator or job; ``efficiency`` = busy / allocated."""

    key: str
    allocated_h: float
    busy_h: float | None
    idle_allocated_h: float = 0.0
    unattributed_busy_h: float | None = None

    @property
    def efficiency(self) -> float | None:
        if self.busy_h is None or not self.allocated_h:
            return None
        return self.busy_h / self.allocated_h


def _resolution(since: datetime, until: datetime) -> str:
    return UsageRollup.Resolution.HOUR if until - since <= HOURLY_MAX_SPAN else UsageRollup.Resolution.DAY


def _measured_rollups(since: datetime, until: datetime):
    """Rollups of the window that carry a busy figure (so allocation and busy cover the same time)."""
    return UsageRollup.objects.filter(
        resolution=_resolution(since, until), period_start__gte=since, period_start__lt=until, gpu_s_busy__isnull=False
    )


def pool_busy_latest() -> dict[str, float]:
    """Busy GPUs per pool in its latest *measured* sample (the newest samples wait for metrics).

    One index probe per orchestrator (``usage_pool_measured``): a MAX over every pool sample grew with the raw
    history kept, 58 ms at two days and 10,000 GPUs, and would be ~400 ms at the default fourteen."""
    latest = UsageSample.objects.filter(orchestrator=OuterRef("pk"), team__isnull=True, gpus_busy__isnull=False)
    busy = Subquery(latest.order_by("-taken_at").values("gpus_busy")[:1])
    rows = Orchestrator.objects.order_by("name").annotate(busy=busy).filter(busy__isnull=False)
    return dict(rows.values_list("name", "busy"))


def busy_now() -> float | None:
    """Busy GPUs fleet-wide from each pool's latest measured sample; None when nothing is measured."""
    pools = pool_busy_latest()
    return sum(pools.values()) if pools else None


def efficiency_by_orchestrator(since: datetime, until: datetime) -> list[Efficiency]:
    """Per scheduler pool: allocated and busy GPU-hours, and busy time no team's workload explains."""
    pools, teams = {}, defaultdict(float)
    rows = _measured_rollups(since, until).values("orchestrator__name", "team_id")
    for row in rows.annotate(allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy")):
        if row["team_id"] is None:
            pools[row["orchestrator__name"]] = (row["allocated"] or 0.0, row["busy"] or 0.0)
        else:
            teams[row["orchestrator__name"]] += row["busy"] or 0.0
    return [
        Efficiency(name, allocated / 3600, busy / 3600, unattributed_busy_h=max(busy - teams[name], 0.0) / 3600)
        for name, (allocated, busy) in sorted(pools.items())
    ]


def efficiency_by_team(since: datetime, until: datetime, visible: set[int] | None = None) -> list[Efficiency]:
    """Per team (its own workloads; sum sub-teams on the page if it shows subtrees), with idle-allocated."""
    idle = _idle_by("workload__team__slug", since, until)
    rows = _measured_rollups(since, until).filter(team__isnull=False)
    if visible is not None:
        rows = rows.filter(team_id__in=visible)
    totals = rows.values("team__slug").annotate(allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy"))
    return [
        Efficiency(r["team__slug"], (r["allocated"] or 0) / 3600, (r["busy"] or 0) / 3600, idle.get(r["team__slug"], 0))
        for r in totals.order_by("team__slug")
    ]


def _utilisation_in(since: datetime, until: datetime):
    """Per-job figures of jobs measured in the window (selectors/finished_jobs lists them job by job)."""
    return WorkloadUtilisation.objects.filter(last_sample_at__gte=since, workload__started_at__lt=until)


def _idle_by(field: str, since: datetime, until: datetime) -> dict[str, float]:
    rows = _utilisation_in(since, until).values(field).annotate(idle=Sum("idle_allocated_gpu_s"))
    return {r[field]: r["idle"] / 3600 for r in rows if r[field]}

