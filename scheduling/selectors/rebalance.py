"""Rebalance plans as pages read them, and the rebalancer's inputs: the fleet, the running work and the
demand per scheduler now, the hold clock, and the owned-vs-target history the page charts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Q

from scheduling.engine.calendar import bounds_at
from scheduling.engine.rebalance import PendingItem, PoolDemand, RebalanceConfig, target_split
from scheduling.engine.types import Node as EngineNode
from scheduling.engine.types import RunningWorkload
from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan, UsageRollup, UsageSample, Workload
from scheduling.selectors.engine_inputs import engine_nodes, rebalance_running
from scheduling.selectors.pool_policies import enabled_rules, local_moment

OPEN_STATES = (RebalancePlan.State.PROPOSED, RebalancePlan.State.APPROVED, RebalancePlan.State.APPLYING)
DEFAULTS = {
    "max_moves": 4,
    "hold_s": 1800.0,
    "dead_band_fraction": 0.05,
    "dead_band_min_gpus": 8,
    "target_utilization": 0.8,
    "drain_timeout_s": 3600.0,
    "trend_window_s": 3600.0,
    "step_retry_s": 15.0,
    "floor_lead_s": 3600.0,
}


def rebalance_settings() -> dict:
    return {**DEFAULTS, **getattr(settings, "GPUPORTAL_REBALANCE", {})}


def engine_config() -> RebalanceConfig:
    values = rebalance_settings()
    return RebalanceConfig(
        target_utilization=float(values["target_utilization"]),
        dead_band_fraction=float(values["dead_band_fraction"]),
        dead_band_min_gpus=int(values["dead_band_min_gpus"]),
        hold_s=float(values["hold_s"]),
        max_moves=int(values["max_moves"]),
    )


def latest_plan_summary() -> tuple[RebalancePlan | None, list[NodeMove]]:
    plan = RebalancePlan.objects.first()
    if plan is None:
        return None, []
    return plan, list(plan.moves.select_related("node", "source", "target")[:20])


def scheduler_orchestrators() -> list[Orchestrator]:
    return list(Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS))


def _epoch(moment: datetime | None) -> float:
    return moment.timestamp() if moment else 0.0


def nodes_now(orchestrators: list[Orchestrator]) -> list[EngineNode]:
    """The fleet for the engine; nodes already in an open plan count as unschedulable (not movable twice)."""
    in_flight = (NodeMove.State.PENDING, NodeMove.State.DRAINING)
    busy = frozenset(
        NodeMove.objects.filter(plan__state__in=OPEN_STATES, state__in=in_flight).values_list("node_id", flat=True)
    )
    return list(engine_nodes(Node.objects.filter(orchestrator__in=orchestrators), unmovable=busy))


def running_now(orchestrators: list[Orchestrator], preempt: Mapping[int, bool]) -> list[RunningWorkload]:
    """Running work per orchestrator; a gang may be broken by a drain where ``preempt[orchestrator pk]``."""
    rows = Workload.objects.filter(orchestrator__in=orchestrators, state=Workload.State.RUNNING)
    fields = ("external_id", "orchestrator_id", "gang_size", "gpus_per_member", "priority", "started_at",
              "duration_estimate_s", "kind", "nodes")
    domains = {o.pk: o.node_domain for o in orchestrators}
    return [
        rebalance_running(row, preempt.get(row.orchestrator_id, False), domains.get(row.orchestrator_id, ""))
        for row in rows.only(*fields)
    ]


def demand_now(
    orchestrators: list[Orchestrator], now: datetime, targets: Mapping[int, float | None]
) -> dict[str, PoolDemand]:
    """Per orchestrator: its pending gangs (GPUs, priority, age), GPUs running, the trend of allocated +
    pending over the last ``trend_window_s`` (from the usage samples) and its own utilisation target."""
    pending: dict[int, list[PendingItem]] = defaultdict(list)
    allocated: dict[int, float] = defaultdict(float)
    rows = Workload.objects.filter(orchestrator__in=orchestrators, state__in=Workload.ACTIVE_STATES).values_list(
        "orchestrator_id", "state", "gang_size", "gpus_per_member", "priority", "submitted_at"
    )
    for orch_id, state, gang, per_member, priority, submitted in rows:
        if state == Workload.State.RUNNING:
            allocated[orch_id] += gang * per_member
        else:
            pending[orch_id].append(PendingItem(gang * per_member, priority, (now - submitted).total_seconds()))
    trend = _trends(orchestrators, now)
    return {
        o.name: PoolDemand(
            o.name,
            tuple(pending[o.pk]),
            allocated[o.pk],
            trend.get(o.pk, 0.0),
            targets.get(o.pk),
        )
        for o in orchestrators
    }


def _trends(orchestrators: list[Orchestrator], now: datetime) -> dict[int, float]:
    window = timedelta(seconds=float(rebalance_settings()["trend_window_s"]))
    samples = (
        UsageSample.objects.filter(
            team__isnull=True, orchestrator__in=orchestrators, taken_at__gte=now - window, taken_at__lte=now
        )
        .order_by("taken_at")
        .values_list("orchestrator_id", "taken_at", "gpus_allocated", "gpus_pending")
    )
    ends: dict[int, list[tuple[datetime, float]]] = defaultdict(list)
    for orch_id, taken_at, alloc, pend in samples:
        ends[orch_id].append((taken_at, alloc + pend))
    trends = {}
    for orch_id, points in ends.items():
        (first_at, first), (last_at, last) = points[0], points[-1]
        hours = (last_at - first_at).total_seconds() / 3600
        if hours > 0:
            trends[orch_id] = (last - first) / hours
    return trends


def held_seconds(now: datetime) -> dict[str, float]:
    """Seconds since each orchestrator last gained or lost a node through a plan (the hold time's clock)."""
    last: dict[str, datetime] = {}
    moved = NodeMove.objects.filter(state=NodeMove.State.MOVED)
    for field in ("source__name", "target__name"):
        for name, at in moved.values(field).annotate(at=Max("updated_at")).values_list(field, "at"):
            last[name] = max(at, last.get(name, at))
    return {name: (now - at).total_seconds() for name, at in last.items()}


@dataclass(frozen=True)
class SplitPoint:
    at: datetime
    orchestrator: str
    owned: float
    allocated: float
    pending: float
    target: float


def split_history(since: datetime, until: datetime) -> list[SplitPoint]:
    """Per hour and orchestrator: GPUs owned and the target the engine would have set from that hour's
    demand and calendar (hourly rollups; the target is recomputed, so it is there for every hour)."""
    orchestrators = scheduler_orchestrators()
    names = {o.pk: o.name for o in orchestrators}
    rows = UsageRollup.objects.filter(
        Q(resolution=UsageRollup.Resolution.HOUR, team__isnull=True, orchestrator__in=orchestrators)
        & Q(period_start__gte=since, period_start__lt=until)
    ).values_list("period_start", "orchestrator_id", "gpu_s_total", "gpu_s_allocated", "gpu_s_pending", "covered_s")
    hours: dict[datetime, dict[str, tuple[float, float, float]]] = defaultdict(dict)
    for start, orch_id, total, alloc, pend, covered in rows:
        if covered:
            hours[start][names[orch_id]] = (total / covered, alloc / covered, pend / covered)
    rules, config, points = enabled_rules(), engine_config(), []
    for start in sorted(hours):
        values = hours[start]
        demand = {n: PoolDemand(n, (PendingItem(p),) if p else (), a) for n, (_t, a, p) in values.items()}
        current = {n: round(t) for n, (t, _a, _p) in values.items()}
        weekday, minute = local_moment(start)
        targets = target_split(current, demand, bounds_at(rules, weekday, minute), config)
        for target in targets:
            owned, alloc, pend = values.get(target.orchestrator, (0.0, 0.0, 0.0))
            points.append(SplitPoint(start, target.orchestrator, owned, alloc, pend, target.target_gpus))
    return points
