"""GPU use over time: per-orchestrator and per-team series, GPU-hours, queue waits."""

import itertools
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max, Q, Sum

from scheduling.models import (
    Queue,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)
from scheduling.selectors.db_time import SecondsBetween
from scheduling.selectors.fleet import GANG_SHAPES
from scheduling.selectors.retention import raw_kept_since
from scheduling.selectors.teams import TeamNow, teams_now

# --------------------------------------------------------------------------------------------------
# Page reads. Every function here issues a fixed number of queries, whatever the number of
# teams, nodes or workloads, so pages stay flat as the fleet grows.
# --------------------------------------------------------------------------------------------------

# Raw samples (one per round) for short windows only: a 24-hour chart of 30-second rounds would be 2,880
# points per series, more than a chart can show; hourly rollups draw it from 24.
RAW_MAX_SPAN = timedelta(hours=6)
HOURLY_MAX_SPAN = timedelta(days=31)


@dataclass(frozen=True)
class Point:
    """One step of a usage series; averages over the step, in GPUs (``busy`` None: not measured)."""

    at: datetime
    total: float
    allocated: float
    busy: float | None
    pending: float


def series_resolution(
    since: datetime, until: datetime, raw_max: timedelta = RAW_MAX_SPAN, raw_since: datetime | None = None
) -> str:
    """'raw' samples for short windows whose raw rows are still kept (from ``raw_since`` on), then hourly
    rollups, then daily ones (a year is 365 points). A short window older than the retention reads hourly
    rollups: its raw rows are pruned, or about to be, and the page must not change when they go."""
    span = until - since
    if span <= raw_max and (raw_since is None or since >= raw_since):
        return "raw"
    return UsageRollup.Resolution.HOUR if span <= HOURLY_MAX_SPAN else UsageRollup.Resolution.DAY


def _series_rows(filters: Q, key: str, since: datetime, until: datetime, raw_max: timedelta):
    """(key, time, total, allocated, busy, pending) averaged per step and summed over the rows of a key."""
    resolution = series_resolution(since, until, raw_max, raw_kept_since() if until - since <= raw_max else None)
    if resolution == "raw":
        rows = (
            UsageSample.objects.filter(filters, taken_at__gte=since, taken_at__lte=until)
            .values(key, "taken_at")
            .annotate(
                total=Sum("gpus_total"),
                allocated=Sum("gpus_allocated"),
                busy=Sum("gpus_busy"),
                pend=Sum("gpus_pending"),
            )
            .order_by("taken_at")
            .values_list(key, "taken_at", "total", "allocated", "busy", "pend")
        )
        yield from rows
        return
    rows = (
        UsageRollup.objects.filter(filters, resolution=resolution, period_start__gte=since, period_start__lte=until)
        .values(key, "period_start")
        .annotate(
            total=Sum("gpu_s_total"),
            allocated=Sum("gpu_s_allocated"),
            busy=Sum("gpu_s_busy"),
            pend=Sum("gpu_s_pending"),
            covered=Max("covered_s"),
        )
        .order_by("period_start")
        .values_list(key, "period_start", "total", "allocated", "busy", "pend", "covered")
    )
    for name, start, total, allocated, busy, pending, covered in rows:
        if covered:
            yield (
                name,
                start,
                total / covered,
                allocated / covered,
                None if busy is None else busy / covered,
                (pending / covered),
            )


def orchestrator_series(since: datetime, until: datetime, raw_max: timedelta = RAW_MAX_SPAN) -> dict[str, list[Point]]:
    """Per orchestrator pool: capacity, allocated, busy and pending GPUs over the window."""
    series: dict[str, list[Point]] = defaultdict(list)
    for name, at, total, allocated, busy, pending in _series_rows(
        Q(team__isnull=True), "orchestrator__name", since, until, raw_max
    ):
        series[name].append(Point(at, total or 0.0, allocated or 0.0, busy, pending or 0.0))
    return dict(series)


def team_series(
    groups: dict[int, str], since: datetime, until: datetime, raw_max: timedelta = timedelta(hours=6)
) -> dict[str, list[Point]]:
    """Allocated (and pending) GPUs over time for groups of teams: ``groups`` maps a team id to the name
    of the series it adds to (a sub-team's whole subtree adds to that sub-team's series)."""
    merged: dict[str, dict[datetime, list[float]]] = defaultdict(dict)
    for team_id, at, _total, allocated, busy, pending in _series_rows(
        Q(team_id__in=list(groups)), "team_id", since, until, raw_max
    ):
        slot = merged[groups[team_id]].setdefault(at, [0.0, 0.0, 0.0])
        slot[0] += allocated or 0.0
        slot[1] += busy or 0.0
        slot[2] += pending or 0.0
    return {
        name: [Point(at, 0.0, v[0], v[1], v[2]) for at, v in sorted(points.items())] for name, points in merged.items()
    }


# --- utilisation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuHours:
    key: str
    label: str
    depth: int
    capacity_h: float | None
    allocated_h: float
    busy_h: float | None


def _rollup_resolution(since: datetime, until: datetime) -> str:
    return UsageRollup.Resolution.HOUR if until - since <= HOURLY_MAX_SPAN else UsageRollup.Resolution.DAY


def gpu_hours_by_orchestrator(since: datetime, until: datetime) -> list[GpuHours]:
    rows = (
        UsageRollup.objects.filter(
            resolution=_rollup_resolution(since, until),
            team__isnull=True,
            period_start__gte=since,
            period_start__lt=until,
        )
        .values("orchestrator__name")
        .annotate(total=Sum("gpu_s_total"), allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy"))
        .order_by("orchestrator__name")
    )
    return [
        GpuHours(
            r["orchestrator__name"],
            r["orchestrator__name"],
            0,
            (r["total"] or 0) / 3600,
            (r["allocated"] or 0) / 3600,
            None if r["busy"] is None else r["busy"] / 3600,
        )
        for r in rows
    ]


def gpu_hours_by_team(since: datetime, until: datetime, visible: set[int] | None = None) -> list[GpuHours]:
    """GPU-hours per team over the window, each team counting its whole subtree, in tree order."""
    rows = (
        UsageRollup.objects.filter(
            resolution=_rollup_resolution(since, until),
            team__isnull=False,
            period_start__gte=since,
            period_start__lt=until,
        )
        .values("team_id")
        .annotate(allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy"))
        .values_list("team_id", "allocated", "busy")
    )
    own = {tid: (alloc or 0.0, busy) for tid, alloc, busy in rows}
    tree = Team.objects.tree()
    result: list[GpuHours] = []
    for team, depth in tree.walk():
        subtree = tree.subtree(team.pk)
        allocated = sum(own.get(i, (0.0, None))[0] for i in subtree)
        busy_values = [own[i][1] for i in subtree if i in own and own[i][1] is not None]
        if visible is None or team.pk in visible:
            result.append(
                GpuHours(
                    team.slug,
                    team.name,
                    depth,
                    None,
                    allocated / 3600,
                    sum(busy_values) / 3600 if busy_values else None,
                )
            )
    return result


@dataclass(frozen=True)
class WaitStats:
    size: str
    jobs: int
    p50_s: float
    p90_s: float
    p99_s: float


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


def size_bucket(gpus: int) -> int:
    for shape in GANG_SHAPES:
        if gpus <= shape:
            return shape
    return GANG_SHAPES[-1] * 2


def queue_waits(since: datetime, until: datetime) -> list[WaitStats]:
    """Queue wait (start minus submit) p50/p90/p99 per request size, for work that started in the window."""
    rows = (
        Workload.objects.filter(started_at__gte=since, started_at__lt=until)
        .annotate(wait=SecondsBetween("submitted_at", "started_at"))
        .values_list("gang_size", "gpus_per_member", "wait")
    )
    waits: dict[int, list[float]] = defaultdict(list)
    for gang, per_member, wait in rows:
        waits[size_bucket(gang * per_member)].append(max(wait or 0.0, 0.0))
    return wait_stats(waits)


def wait_stats(waits_by_bucket: dict[int, list[float]]) -> list[WaitStats]:
    """Nearest-rank p50/p90/p99 of each request-size bucket's waits (seconds), smallest size first."""
    stats = []
    for bucket in sorted(waits_by_bucket):
        values = sorted(waits_by_bucket[bucket])
        label = f"{bucket} GPU" if bucket <= GANG_SHAPES[-1] else f">{GANG_SHAPES[-1]} GPU"
        stats.append(
            WaitStats(label, len(values), percentile(values, 0.5), percentile(values, 0.9), percentile(values, 0.99))
        )
    return stats


# --- teams ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareRow:
    slug: str
    name: str
    target_pct: float
    actual_now_pct: float
    actual_window_pct: float
    allocated_now: int
    gpu_hours: float


@dataclass
class TeamDetail:
    team: Team
    lineage: list[Team]
    children: list[Team]
    subtree: list[int]
    standing: TeamNow | None
    queues: list[Queue]
    series: dict[str, list[Point]]
    series_by: str
    shares: list[ShareRow]


OWN_WORK = "(own work)"


def team_detail(team: Team, since: datetime, until: datetime) -> TeamDetail:
    """A team's standing, its sub-teams' allocation over time and their target vs actual shares."""
    tree = Team.objects.tree()
    kids = [tree.teams[i] for i in tree.children.get(team.pk, [])]
    groups = {team.pk: OWN_WORK if kids else team.name}
    for kid in kids:
        groups.update(dict.fromkeys(tree.subtree(kid.pk), kid.name))
    if kids or until - since > USER_SERIES_MAX_SPAN:
        series, by = team_series(groups, since, until), "sub-team" if kids else "team"
    else:
        series, by = user_series(team.pk, since, until), "user"
    standings = {t.slug: t for t in teams_now()}
    lineage = [tree.teams[tid] for tid in reversed(tree.ancestors(team.pk))]
    return TeamDetail(
        team=team,
        lineage=lineage,
        children=kids,
        subtree=list(groups),
        standing=standings.get(team.slug),
        queues=list(Queue.objects.filter(team=team)),
        series=series,
        series_by=by,
        shares=_shares(kids, standings, series),
    )


def _gpu_hours(points: list[Point]) -> float:
    if len(points) < 2:
        return 0.0
    total = 0.0
    for current, following in itertools.pairwise(points):
        total += current.allocated * (following.at - current.at).total_seconds()
    return total / 3600


def _shares(kids: list[Team], standings: dict[str, TeamNow], series: dict[str, list[Point]]) -> list[ShareRow]:
    now_total = sum(standings[k.slug].allocated for k in kids if k.slug in standings) or 0
    hours = {k.name: _gpu_hours(series.get(k.name, [])) for k in kids}
    hours_total = sum(hours.values())
    rows = []
    for kid in kids:
        standing = standings.get(kid.slug)
        allocated = standing.allocated if standing else 0
        rows.append(
            ShareRow(
                kid.slug,
                kid.name,
                standing.weight if standing else 0.0,
                100 * allocated / now_total if now_total else 0.0,
                100 * hours[kid.name] / hours_total if hours_total else 0.0,
                allocated,
                hours[kid.name],
            )
        )
    return rows


USER_SERIES_MAX_SPAN = timedelta(days=31)


def user_series(
    team_id: int, since: datetime, until: datetime, points: int = 120, top: int = 8
) -> dict[str, list[Point]]:
    """GPUs held by each user of a team over the window, rebuilt from its workloads' start and finish
    times (usage samples are per team, not per user); the ``top`` users by GPU-hours, the rest summed."""
    rows = (
        Workload.objects.filter(team_id=team_id, started_at__lt=until, started_at__isnull=False)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
        .values_list("user", "started_at", "finished_at", "gang_size", "gpus_per_member")
    )
    step = (until - since) / points
    moments = [since + step * i for i in range(points + 1)]
    held: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(moments))
    for user, started, finished, gang, per_member in rows:
        end = finished or until
        first = max(0, int((started - since) / step) + (started > since))
        last = min(len(moments) - 1, int((end - since) / step))
        series = held[user or "(unknown)"]
        for i in range(first, last + 1):
            series[i] += gang * per_member
    ranked = sorted(held, key=lambda name: -sum(held[name]))
    shown = {name: held[name] for name in ranked[:top]}
    if len(ranked) > top:
        shown["other users"] = [sum(held[name][i] for name in ranked[top:]) for i in range(len(moments))]
    return {
        name: [Point(at, 0.0, v, None, 0.0) for at, v in zip(moments, values, strict=True)]
        for name, values in shown.items()
    }
