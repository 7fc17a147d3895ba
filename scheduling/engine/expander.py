"""The gpu-priority-expander: which node group cluster-autoscaler should grow for pending GPU pods.

cluster-autoscaler (``--expander=grpc``) offers the node groups whose template fits its pending pods, each
with how many nodes it would add and which pods those would help. The portal picks one from the fleet's
point of view, not one cluster's:

1. a GPU scale-up never grows a group that would take its pool above the ceiling of the pool policy in force
   (the rule is named in the reason);
2. among the rest, the pool whose queue the rebalancer leaves most short (``PoolTarget.desired_gpus`` less what
   it owns: running work at the target utilisation plus pending GPUs weighted by priority and age) goes first,
   so new nodes land where the three schedulers' queues need them;
3. then the option that helps the most weighted pending GPUs, then the least waste (GPUs added beyond what
   the pods ask, as CA's least-waste), then the fewest nodes, then the name (deterministic).

Scale-ups that ask for no GPU are left to cluster-autoscaler's fallback expander untouched. When every option
breaks a ceiling the answer is empty, and cluster-autoscaler then keeps all its options (its gRPC client
cannot be vetoed): a group's ``maxSize`` is what caps growth, and the reason says so.

Pure: the pools' targets and bounds are inputs, computed from the last collect round by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.engine.calendar import Bounds
from scheduling.engine.rebalance import PendingItem, PoolTarget, RebalanceConfig, pending_weight
from scheduling.wording import plural

DEFAULT_CONFIG = RebalanceConfig()


@dataclass(frozen=True, slots=True)
class PodAsk:
    """One pending pod an option would help: its GPUs (all containers) and its priority."""

    gpus: float
    priority: int = 0


@dataclass(frozen=True, slots=True)
class GrowthOption:
    """One node group cluster-autoscaler could grow, read from its template node and the pods it helps."""

    node_group: str
    node_count: int
    gpus_per_node: int
    pool: str
    """The orchestrator whose pool the new nodes join (the template's ``gpuportal.io/pool`` label)."""
    gpu_model: str = ""
    pods: tuple[PodAsk, ...] = ()

    @property
    def gpus_added(self) -> int:
        return self.node_count * self.gpus_per_node

    @property
    def gpus_asked(self) -> float:
        return sum(pod.gpus for pod in self.pods)


@dataclass(frozen=True, slots=True)
class RankedOption:
    node_group: str
    pool: str
    eligible: bool
    pressure_gpus: float
    """How far the pool's demand is above what it owns (weighted GPUs; 0 when it is not short)."""
    helped_weight: float
    waste_gpus: float
    reason: str


@dataclass(frozen=True, slots=True)
class ExpanderVerdict:
    chosen: tuple[str, ...]
    """Node groups returned to cluster-autoscaler, best first (empty: it keeps every option)."""
    ranked: tuple[RankedOption, ...]
    summary: str


def choose_growth(
    options: Sequence[GrowthOption],
    targets: Sequence[PoolTarget],
    bounds: Mapping[str, Bounds],
    config: RebalanceConfig = DEFAULT_CONFIG,
) -> ExpanderVerdict:
    """Rank ``options`` for the fleet and pick the node group to grow (see the module's rules)."""
    if not options:
        return ExpanderVerdict((), (), "cluster-autoscaler offered no option")
    if all(option.gpus_asked <= 0 for option in options):
        return ExpanderVerdict(
            tuple(option.node_group for option in options), tuple(_unranked(option) for option in options),
            "no pending pod asks for a GPU: every option is left to cluster-autoscaler's fallback expander",
        )
    by_pool = {target.orchestrator: target for target in targets}
    ranked = sorted(
        (_rank(option, by_pool.get(option.pool), bounds.get(option.pool), config) for option in options),
        key=lambda r: (not r.eligible, -r.pressure_gpus, -r.helped_weight, r.waste_gpus, r.node_group),
    )
    best = ranked[0]
    if not best.eligible:
        return ExpanderVerdict(
            (), tuple(ranked),
            "every option breaks a pool ceiling or adds no GPU: cluster-autoscaler falls back to all of them, "
            "so only each node group's maxSize caps this scale-up",
        )
    return ExpanderVerdict((best.node_group,), tuple(ranked), f"grow {best.node_group}: {best.reason}")


def _unranked(option: GrowthOption) -> RankedOption:
    return RankedOption(option.node_group, option.pool, True, 0.0, 0.0, 0.0, "no GPU asked")


def _rank(
    option: GrowthOption, target: PoolTarget | None, bound: Bounds | None, config: RebalanceConfig,
) -> RankedOption:
    helped = sum(pending_weight(PendingItem(pod.gpus, pod.priority), config) for pod in option.pods)
    waste = max(0.0, option.gpus_added - option.gpus_asked)
    owned = target.current_gpus if target is not None else 0
    pressure = max(0.0, target.desired_gpus - owned) if target is not None else 0.0

    def ranked(eligible: bool, reason: str) -> RankedOption:
        return RankedOption(option.node_group, option.pool, eligible, round(pressure, 1), round(helped, 1),
                            waste, reason)

    if option.gpus_added <= 0:
        return ranked(False, "its template node has no GPU")
    ceiling = target.ceiling_gpus if target is not None else None
    if ceiling is not None and owned + option.gpus_added > ceiling:
        rule = f" (rule {bound.rule!r})" if bound is not None and bound.rule else ""
        return ranked(False, f"{option.gpus_added} GPUs would take pool {option.pool} from {owned} to "
                             f"{owned + option.gpus_added}, above its ceiling of {ceiling}{rule}")
    if target is None:
        return ranked(True, f"pool {option.pool!r} is no orchestrator the portal knows: no queue to weigh")
    short = f"queue {_gpus(pressure)} weighted GPUs short" if pressure > 0 else "queue not short"
    return ranked(True, f"pool {option.pool} {short} (wants {target.desired_gpus:g}, owns {owned}); "
                        f"{plural(option.node_count, 'node')} add {plural(option.gpus_added, 'GPU')} "
                        f"for {_gpus(option.gpus_asked)} asked ({_gpus(waste)} spare)")


def _gpus(value: float) -> str:
    return f"{value:g}" if math.isfinite(value) else "?"
