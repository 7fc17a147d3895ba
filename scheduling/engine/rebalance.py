"""Rebalancing the shared pool: how many GPUs each orchestrator should own now, and which nodes move.

1. **Demand** per orchestrator (``desired_gpus``): what it runs divided by a Ray-style
   ``target_utilization`` (0.8: an orchestrator running 80 GPUs wants 100), plus its pending GPUs
   weighted by priority and age, plus the recent trend over a short horizon.
2. **Target split** (``target_split``): every calendar floor first; the rest of the fleet by demand,
   never above a ceiling. GPUs nobody asks for stay where they are (moving idle capacity gains nothing).
   Hysteresis: a pool whose target is within the dead band of what it owns, or that changed less than
   ``hold_s`` ago, keeps what it has (unless that breaks a floor or ceiling).
3. **Plan** (``plan_rebalance``): whole nodes move from pools above target to pools below, at most
   ``max_moves`` per cycle, never taking a pool below its floor or above its ceiling, never a pinned or
   unschedulable node, never a node holding a member of a multi-node gang that may not be preempted.
   Cheapest drains first: idle nodes, then least GPU-time lost.
4. **Expander advice**: when demand exceeds the fleet, which node group to grow (by weighted unmet
   queue, as Cluster Autoscaler's priority expander orders groups) -- advice only, nothing acts on it.

Pure: ``now`` and the time since each pool last changed are inputs; nothing reads a clock.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduling.engine.calendar import Bounds
from scheduling.engine.types import Node, RunningWorkload
from scheduling.wording import plural

UNKNOWN_REMAINING_S = 24 * 3600.0
"""Work of unknown end on a non-preemptible single-node workload: assume a day of waiting to drain it."""


@dataclass(frozen=True, slots=True)
class PendingItem:
    gpus: float
    priority: int = 0
    age_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PoolDemand:
    """What one orchestrator's last snapshots say: its queue, what it runs and where that is heading."""

    orchestrator: str
    pending: tuple[PendingItem, ...] = ()
    allocated_gpus: float = 0.0
    trend_gpus_per_h: float = 0.0
    target_utilization: float | None = None

    @property
    def pending_gpus(self) -> float:
        return sum(item.gpus for item in self.pending)


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    target_utilization: float = 0.8
    priority_scale: float = 100.0
    """A pending GPU of priority p weighs clamp(1 + p / priority_scale, 0.5, 3)."""
    age_scale_s: float = 3600.0
    max_age_boost: float = 2.0
    """A pending GPU's weight grows linearly with its wait, up to this factor after ``age_scale_s``."""
    trend_horizon_h: float = 0.5
    dead_band_fraction: float = 0.05
    dead_band_min_gpus: int = 8
    hold_s: float = 1800.0
    max_moves: int = 4


@dataclass(frozen=True, slots=True)
class PoolTarget:
    orchestrator: str
    current_gpus: int
    floor_gpus: int
    ceiling_gpus: int | None
    desired_gpus: float
    target_gpus: int
    reason: str
    lendable: bool = True
    """False while a non-lendable rule is in force: the pool never gives a node away, not even to a floor."""


@dataclass(frozen=True, slots=True)
class NodeMovePlan:
    node: str
    source: str
    target: str
    gpus: int
    drain_cost_gpu_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class PoolEffect:
    orchestrator: str
    gpus_before: int
    gpus_after: int
    allocated_gpus: float
    pending_gpus: float
    pending_served_gpus: float
    utilisation_before: float
    utilisation_after: float


@dataclass(frozen=True, slots=True)
class ExpanderAdvice:
    orchestrator: str
    node_group: str
    gpus_short: int
    nodes_to_add: int
    reason: str


@dataclass(frozen=True, slots=True)
class RebalanceDecision:
    targets: tuple[PoolTarget, ...]
    moves: tuple[NodeMovePlan, ...]
    effects: tuple[PoolEffect, ...]
    advice: tuple[ExpanderAdvice, ...] = ()
    reasons: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------------------------ demand


def pending_weight(item: PendingItem, config: RebalanceConfig) -> float:
    priority = min(max(1.0 + item.priority / config.priority_scale, 0.5), 3.0)
    age = 1.0 + min(max(item.age_s, 0.0) / config.age_scale_s, 1.0) * (config.max_age_boost - 1.0)
    return item.gpus * priority * age


def desired_gpus(demand: PoolDemand, config: RebalanceConfig) -> float:
    """GPUs the orchestrator should own to run what it runs at the target utilisation and start its queue."""
    utilization = demand.target_utilization or config.target_utilization
    running = demand.allocated_gpus / utilization if utilization > 0 else demand.allocated_gpus
    queued = sum(pending_weight(item, config) for item in demand.pending)
    trend = max(0.0, demand.trend_gpus_per_h) * config.trend_horizon_h
    return running + queued + trend


# ------------------------------------------------------------------------------------ target split


def current_gpus(nodes: Sequence[Node]) -> dict[str, int]:
    """GPUs each orchestrator owns and may schedule on (draining and down nodes do not count)."""
    owned: dict[str, int] = defaultdict(int)
    for node in nodes:
        owned[node.orchestrator] += node.gpu_total if node.schedulable else 0
    return dict(owned)


def _dead_band(total: int, config: RebalanceConfig) -> float:
    return max(float(config.dead_band_min_gpus), config.dead_band_fraction * total)


def target_split(
    current: Mapping[str, int],
    demand: Mapping[str, PoolDemand],
    bounds: Mapping[str, Bounds],
    config: RebalanceConfig = RebalanceConfig(),
    held_s: Mapping[str, float] | None = None,
) -> tuple[PoolTarget, ...]:
    """GPUs each orchestrator should own: floors, then the rest by demand, with hysteresis.

    ``held_s`` is how long ago each pool last gained or lost a node (missing: long ago).
    """
    names = sorted(set(current) | set(demand) | set(bounds))
    total = sum(current.values())
    floor = {n: bounds[n].floor_gpus if n in bounds else 0 for n in names}
    ceiling = {n: _ceiling(bounds.get(n), total) for n in names}
    keep = {n: floor[n] if not _frozen(bounds.get(n)) else max(floor[n], current.get(n, 0)) for n in names}
    if sum(keep.values()) > total:
        keep = dict(floor)
    want = {n: desired_gpus(demand.get(n, PoolDemand(n)), config) for n in names}
    extra = {n: max(0.0, min(ceiling[n], want[n]) - keep[n]) for n in names}
    rest = max(0.0, total - sum(keep.values()))
    asked = sum(extra.values())
    if asked > rest:
        share = {n: rest * extra[n] / asked for n in names}
        reason = (
            f"demand above the floors ({asked:.0f} GPUs) exceeds what the floors leave ({rest:.0f} of {total} "
            "GPUs): that rest is shared by weighted demand"
        )
    else:
        share = dict(extra)
        leftover = rest - asked
        for n in names:  # unasked capacity stays with its owner, up to what it owns now
            back = min(leftover, max(0.0, min(current.get(n, 0), ceiling[n]) - keep[n] - share[n]))
            share[n] += back
            leftover -= back
        reason = f"floors plus demand: {asked:.0f} GPUs wanted above the floors, {rest:.0f} free of them"
    raw = {n: keep[n] + share[n] for n in names}
    band = _dead_band(total, config)
    targets = []
    for n in names:
        owned = current.get(n, 0)
        target, why = raw[n], reason
        within = floor[n] <= owned <= ceiling[n]
        if within and abs(target - owned) < band:
            target, why = owned, f"within the dead band ({band:g} GPUs) of what it owns"
        elif within and held_s is not None and held_s.get(n, math.inf) < config.hold_s:
            target, why = owned, f"held: it changed {held_s[n]:.0f} s ago (minimum hold {config.hold_s:g} s)"
        targets.append(PoolTarget(
            n, owned, floor[n], bounds[n].ceiling_gpus if n in bounds else None, round(want[n], 1),
            max(floor[n], min(ceiling[n], round(target))), why, not _frozen(bounds.get(n)),
        ))
    return tuple(targets)


def _ceiling(bound: Bounds | None, total: int) -> int:
    if bound is None or bound.ceiling_gpus is None:
        return total
    return max(bound.ceiling_gpus, bound.floor_gpus)


def _frozen(bound: Bounds | None) -> bool:
    """A rule that is not lendable keeps its pool from shrinking while it is in effect."""
    return bound is not None and not bound.lendable


# ---------------------------------------------------------------------------------------- drain cost


def drain_costs(nodes: Sequence[Node], running: Sequence[RunningWorkload], now: float) -> dict[str, float | None]:
    """GPU-seconds lost by draining each node; None where a gang would break and its owner forbids it.

    A preemptible workload on the node loses its whole gang's work so far (GPUs x elapsed); a
    non-preemptible one on this node alone is waited for (its GPUs here x its remaining time).
    """
    cost: dict[str, float | None] = {n.name: 0.0 for n in nodes}
    for work in running:
        hosts = {a.node for a in work.assignments}
        for host in hosts & cost.keys():
            current = cost[host]
            if current is None:
                continue
            on_host = sum(len(a.gpu_indices) for a in work.assignments if a.node == host)
            if work.preemptible:
                cost[host] = current + work.gpus * max(0.0, now - work.started_at)
            elif len(hosts) > 1:
                cost[host] = None
            else:
                remaining = UNKNOWN_REMAINING_S if work.expected_end is None else max(0.0, work.expected_end - now)
                cost[host] = current + on_host * remaining
    return cost


def _movable(node: Node, cost: float | None) -> bool:
    return not node.pinned and node.schedulable and cost is not None


# ------------------------------------------------------------------------------------------------ plan


def plan_rebalance(
    nodes: Sequence[Node],
    running: Sequence[RunningWorkload],
    demand: Mapping[str, PoolDemand],
    bounds: Mapping[str, Bounds],
    now: float,
    config: RebalanceConfig = RebalanceConfig(),
    held_s: Mapping[str, float] | None = None,
) -> RebalanceDecision:
    """Targets, the node moves toward them (cheapest drains first, capped) and their predicted effect."""
    current = current_gpus(nodes)
    for name in set(demand) | set(bounds):
        current.setdefault(name, 0)
    targets = target_split(current, demand, bounds, config, held_s)
    by_name = {t.orchestrator: t for t in targets}
    costs = drain_costs(nodes, running, now)
    owned = dict(current)
    candidates: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        if _movable(node, costs[node.name]):
            candidates[node.orchestrator].append(node)
    for pool in candidates.values():
        pool.sort(key=lambda n: (costs[n.name] or 0.0, -n.gpu_total, n.name))
    moves: list[NodeMovePlan] = []
    reasons: list[str] = []
    while len(moves) < config.max_moves:
        move = _next_move(by_name, owned, candidates, costs, demand)
        if move is None:
            break
        moves.append(move)
        owned[move.source] -= move.gpus
        owned[move.target] += move.gpus
    if len(moves) == config.max_moves and _next_move(by_name, owned, candidates, costs, demand) is not None:
        reasons.append(f"capped at {config.max_moves} node moves this cycle; the rest waits for the next one")
    skipped = [n.name for n in nodes if costs[n.name] is None and n.schedulable]
    if skipped:
        reasons.append("not moved (a non-preemptible multi-node gang runs there): " + ", ".join(sorted(skipped)))
    effects = _effects(targets, current, owned, demand)
    advice = expander_advice(nodes, targets, demand, config)
    return RebalanceDecision(targets, tuple(moves), effects, advice, tuple(reasons))


def _gap(target: PoolTarget, owned: int) -> int:
    return target.target_gpus - owned


def _next_move(
    targets: Mapping[str, PoolTarget],
    owned: Mapping[str, int],
    candidates: Mapping[str, list[Node]],
    costs: Mapping[str, float | None],
    demand: Mapping[str, PoolDemand],
) -> NodeMovePlan | None:
    """The most urgent receiver (below floor first, then largest deficit) takes the cheapest node a donor
    can spare without going below its floor or target."""
    receivers = sorted(
        (t for t in targets.values() if _gap(t, owned[t.orchestrator]) > 0),
        key=lambda t: (owned[t.orchestrator] >= t.floor_gpus, -_gap(t, owned[t.orchestrator]), t.orchestrator),
    )
    donors = sorted(
        (t for t in targets.values() if _gap(t, owned[t.orchestrator]) < 0),
        key=lambda t: (_gap(t, owned[t.orchestrator]), t.orchestrator),
    )
    for receiver in receivers:
        deficit = _gap(receiver, owned[receiver.orchestrator])
        below_floor = owned[receiver.orchestrator] < receiver.floor_gpus
        if below_floor:  # a floor beats hysteresis: any pool above its own floor may give
            donors = sorted(
                (t for t in targets.values() if t.orchestrator != receiver.orchestrator and t.lendable),
                key=lambda t: (_gap(t, owned[t.orchestrator]), t.floor_gpus - owned[t.orchestrator], t.orchestrator),
            )
        for donor in donors:
            excess = -_gap(donor, owned[donor.orchestrator])
            for node in candidates.get(donor.orchestrator, ()):
                if not _fits(node.gpu_total, deficit, excess, below_floor, receiver, donor, owned):
                    continue
                candidates[donor.orchestrator].remove(node)
                cost = costs[node.name] or 0.0
                return NodeMovePlan(
                    node.name, donor.orchestrator, receiver.orchestrator, node.gpu_total, cost,
                    _move_reason(node, cost, receiver, donor, owned, demand),
                )
    return None


def _fits(
    gpus: int, deficit: int, excess: int, below_floor: bool, receiver: PoolTarget, donor: PoolTarget,
    owned: Mapping[str, int],
) -> bool:
    """Half a node of need on both sides is enough to move it (no ping-pong: the dead band is wider)."""
    if owned[donor.orchestrator] - gpus < donor.floor_gpus:
        return False
    if receiver.ceiling_gpus is not None and owned[receiver.orchestrator] + gpus > receiver.ceiling_gpus:
        return False
    above_ceiling = donor.ceiling_gpus is not None and owned[donor.orchestrator] > donor.ceiling_gpus
    return below_floor or (2 * deficit >= gpus and (above_ceiling or 2 * excess >= gpus))


def _move_reason(
    node: Node, cost: float, receiver: PoolTarget, donor: PoolTarget, owned: Mapping[str, int],
    demand: Mapping[str, PoolDemand],
) -> str:
    need = (
        f"{receiver.orchestrator} is below its floor of {receiver.floor_gpus} GPUs"
        if owned[receiver.orchestrator] < receiver.floor_gpus
        else f"{receiver.orchestrator} wants {receiver.target_gpus} GPUs (has {owned[receiver.orchestrator]}, "
        f"{demand.get(receiver.orchestrator, PoolDemand('')).pending_gpus:g} pending)"
    )
    spare = f"{donor.orchestrator} has {owned[donor.orchestrator]} for a target of {donor.target_gpus}"
    drain = "idle node" if cost == 0 else f"drain loses {cost / 3600:.1f} GPU-h"
    return f"{need}; {spare}; {drain}"


def _effects(
    targets: Sequence[PoolTarget], before: Mapping[str, int], after: Mapping[str, int],
    demand: Mapping[str, PoolDemand],
) -> tuple[PoolEffect, ...]:
    effects = []
    for target in targets:
        name = target.orchestrator
        load = demand.get(name, PoolDemand(name))
        gained = max(0, after[name] - before[name])
        effects.append(PoolEffect(
            name, before[name], after[name], load.allocated_gpus, load.pending_gpus,
            min(load.pending_gpus, float(gained)),
            _utilisation(load.allocated_gpus, before[name]),
            _utilisation(load.allocated_gpus + min(load.pending_gpus, float(gained)), after[name]),
        ))
    return tuple(effects)


def _utilisation(allocated: float, capacity: int) -> float:
    return round(min(allocated, capacity) / capacity, 4) if capacity else 0.0


# -------------------------------------------------------------------------------------------- expander


def expander_advice(
    nodes: Sequence[Node], targets: Sequence[PoolTarget], demand: Mapping[str, PoolDemand],
    config: RebalanceConfig = RebalanceConfig(),
) -> tuple[ExpanderAdvice, ...]:
    """Which node group to grow when the pool cannot meet demand: the orchestrators whose weighted
    queue the split leaves unserved, largest first, each with its most common node shape."""
    shapes: dict[str, Counter[tuple[str, int]]] = defaultdict(Counter)
    for node in nodes:
        shapes[node.orchestrator][(node.gpu_model, node.gpu_total)] += 1
    if sum(min(t.desired_gpus, t.ceiling_gpus or math.inf) for t in targets) <= sum(t.current_gpus for t in targets):
        return ()
    advice = []
    for target in targets:
        load = demand.get(target.orchestrator)
        if load is None or not load.pending:
            continue
        short = min(load.pending_gpus, target.desired_gpus - max(target.target_gpus, target.current_gpus))
        if short < 1 or (target.ceiling_gpus is not None and target.target_gpus >= target.ceiling_gpus):
            continue
        (model, per_node), _count = (shapes[target.orchestrator] or Counter({("", 8): 1})).most_common(1)[0]
        per_node = per_node or 8
        nodes_needed = math.ceil(short / per_node)
        weighted = sum(pending_weight(item, config) for item in load.pending)
        advice.append(ExpanderAdvice(
            target.orchestrator, f"{target.orchestrator}/{model or 'gpu'}x{per_node}", math.ceil(short), nodes_needed,
            f"{load.pending_gpus:g} GPUs pending (weighted {weighted:.0f}) and the shared pool is exhausted: "
            f"grow by {plural(nodes_needed, 'node')}",
        ))
    advice.sort(key=lambda a: (-a.gpus_short, a.orchestrator))
    return tuple(advice)
