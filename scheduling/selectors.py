"""ORM -> plain data and engine types: what pages, reports and the engine read."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from scheduling.engine.fragmentation import largest_placeable
from scheduling.engine.types import MILLI_PER_GPU
from scheduling.engine.types import Node as EngineNode
from scheduling.models import Node, Orchestrator, Queue, RebalancePlan, Team, UsageRollup, UsageSample, Workload

GANG_SHAPES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PoolNow:
    name: str
    kind: str
    nodes: int
    gpus_total: int
    gpus_allocated: int
    gpus_pending: int
    workloads_pending: int
    stale: bool
    last_success_at: datetime | None
    last_error: str


@dataclass(frozen=True)
class TeamNow:
    slug: str
    name: str
    depth: int
    weight: float
    guaranteed: int
    burst_limit: int
    allocated: int
    pending: int


def pools_now() -> list[PoolNow]:
    nodes = Node.objects.values("orchestrator_id").annotate(
        count=Count("id"), total=Sum("gpu_total"), allocated=Sum("gpu_allocated")
    )
    node_totals = {row["orchestrator_id"]: row for row in nodes}
    pending = (
        Workload.objects.filter(state=Workload.State.PENDING)
        .values("orchestrator_id")
        .annotate(gpus=Sum(F("gang_size") * F("gpus_per_member")), count=Count("id"))
    )
    pending_totals = {row["orchestrator_id"]: row for row in pending}
    return [
        PoolNow(
            name=o.name,
            kind=o.get_kind_display(),
            nodes=node_totals.get(o.pk, {}).get("count", 0),
            gpus_total=node_totals.get(o.pk, {}).get("total") or 0,
            gpus_allocated=node_totals.get(o.pk, {}).get("allocated") or 0,
            gpus_pending=pending_totals.get(o.pk, {}).get("gpus") or 0,
            workloads_pending=pending_totals.get(o.pk, {}).get("count") or 0,
            stale=o.is_stale,
            last_success_at=o.last_success_at,
            last_error=o.last_error,
        )
        for o in Orchestrator.objects.filter(enabled=True)
    ]


def teams_now(visible: list[Team] | None = None) -> list[TeamNow]:
    """Each team's entitlement (any-model queue) and what it and its sub-teams hold and wait for now."""
    teams = list(Team.objects.all())
    children: dict[int | None, list[Team]] = defaultdict(list)
    for team in teams:
        children[team.parent_id].append(team)
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="")}
    own = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id")
        .annotate(
            allocated=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.RUNNING)),
            pending=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.PENDING)),
        )
    )
    usage = {row["team_id"]: (row["allocated"] or 0, row["pending"] or 0) for row in own}
    allowed = None if visible is None else {t.pk for t in visible}
    rows: list[TeamNow] = []

    def walk(parent_id: int | None, depth: int) -> tuple[int, int]:
        total_alloc = total_pend = 0
        for team in sorted(children[parent_id], key=lambda t: t.slug):
            alloc, pend = usage.get(team.pk, (0, 0))
            index = len(rows)
            sub_alloc, sub_pend = walk(team.pk, depth + 1)
            alloc, pend = alloc + sub_alloc, pend + sub_pend
            if allowed is None or team.pk in allowed:
                q = queues.get(team.pk)
                rows.insert(
                    index,
                    TeamNow(
                        team.slug,
                        team.name,
                        depth,
                        float(q.weight) if q else 0.0,
                        q.guaranteed if q else 0,
                        q.burst_limit if q else 0,
                        alloc,
                        pend,
                    ),
                )
            total_alloc, total_pend = total_alloc + alloc, total_pend + pend
        return total_alloc, total_pend

    walk(None, 0)
    return rows


def engine_nodes() -> tuple[EngineNode, ...]:
    """The fleet as the engine sees it; a node's allocated GPUs are its lowest indices."""
    return tuple(
        EngineNode(
            name=n.name,
            gpu_total=n.gpu_total,
            gpu_model=n.gpu_model,
            gpu_free_milli=(0,) * n.gpu_allocated + (MILLI_PER_GPU,) * (n.gpu_total - n.gpu_allocated),
            nvlink_domain=n.nvlink_domain,
            leaf_switch=n.leaf_switch,
            spine=n.spine,
            orchestrator=n.orchestrator.name,
            pinned=n.pinned,
            schedulable=n.state not in (Node.State.DRAINED, Node.State.DRAINING, Node.State.DOWN),
        )
        for n in Node.objects.select_related("orchestrator")
    )


def largest_gangs_now() -> dict[int, int]:
    """How many gangs of each GPU count could start right now on free GPUs."""
    return largest_placeable(engine_nodes(), GANG_SHAPES)


def pool_series(hours: int = 24, now: datetime | None = None) -> dict[str, list[tuple[datetime, float, float]]]:
    """Per orchestrator: (time, capacity, allocated) over the window; raw samples for a day, rollups beyond."""
    now = now or timezone.now()
    since = now - timedelta(hours=hours)
    series: dict[str, list[tuple[datetime, float, float]]] = defaultdict(list)
    if hours <= 48:
        rows = (
            UsageSample.objects.filter(team__isnull=True, taken_at__gte=since)
            .order_by("taken_at")
            .values_list("orchestrator__name", "taken_at", "gpus_total", "gpus_allocated")
        )
        for name, taken_at, total, allocated in rows:
            series[name].append((taken_at, total, allocated))
        return dict(series)
    rollups = (
        UsageRollup.objects.filter(resolution=UsageRollup.Resolution.HOUR, team__isnull=True, period_start__gte=since)
        .order_by("period_start")
        .values_list("orchestrator__name", "period_start", "gpu_s_total", "gpu_s_allocated", "covered_s")
    )
    for name, start, total_s, allocated_s, covered in rollups:
        if covered:
            series[name].append((start, total_s / covered, allocated_s / covered))
    return dict(series)


def latest_plan() -> RebalancePlan | None:
    return RebalancePlan.objects.prefetch_related("moves__node").first()
