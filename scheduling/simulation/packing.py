"""Packing mode: the FGD (ATC'23) static-packing protocol, every placement decided by the engine.

Protocol (``../shared/traces/README.md`` section 1 and the FGD artifact): start from the empty node
list; shuffle the pod list with the seed, then append randomly drawn copies until the total GPU request
reaches ``tune`` (1.3) times the fleet's GPU capacity; submit pods one by one, never deleting any; a pod
that does not fit is dropped (not retried). After every arrival record the GPU allocation ratio
(allocated milli-GPUs / capacity). Column ``k`` of the result averages the allocation over the
arrivals whose arrived GPU request, in % of capacity, rounds to ``k`` (this reproduces the published
files' first columns: 0.25 at k = 0, ~k after). Fragmentation is sampled at the first arrival of
each column.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from scheduling.engine.fragmentation import expected_fragment_milli
from scheduling.engine.kube_score import KUBE_POLICIES, typical_pods
from scheduling.engine.placement import ClusterState
from scheduling.engine.sizemix import member_milli, normalised_mix, size_mix_of
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Rejection, Request, SizeMix
from scheduling.simulation.cpu_only import CpuOnlyPlacer
from scheduling.simulation.fast_random import RandomSinglePlacer
from scheduling.simulation.mirror import FleetMirror
from scheduling.simulation.progress import ProgressCallback, Throttle

FGD_TUNE = 1.3
FGD_SEEDS = tuple(range(42, 52))


@dataclass(frozen=True)
class PackingResult:
    policy: str
    seed: int
    capacity_gpus: int
    pods_submitted: int
    pods_placed: int
    allocation_pct: tuple[float | None, ...]
    """Index k = 0..130: mean allocation (% of capacity) over arrivals whose arrived % rounds to k."""
    fragmentation_pct: tuple[float | None, ...]
    """Index k: fragmented GPUs (engine definition) as % of capacity, at the first arrival of column k."""
    arrived_pct_final: float
    wall_time_s: float
    failures_by_size: dict[str, int] = field(default_factory=dict)

    def at(self, arrived_pct: int) -> float | None:
        return self.allocation_pct[arrived_pct]

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": "packing",
            "policy": self.policy,
            "seed": self.seed,
            "capacity_gpus": self.capacity_gpus,
            "pods_submitted": self.pods_submitted,
            "pods_placed": self.pods_placed,
            "allocation_at_100_pct": self.at(100) if len(self.allocation_pct) > 100 else None,
            "allocation_pct": list(self.allocation_pct),
            "fragmentation_pct": list(self.fragmentation_pct),
            "arrived_pct_final": self.arrived_pct_final,
            "failures_by_size": self.failures_by_size,
            "wall_time_s": self.wall_time_s,
        }


def inflate_and_shuffle(
    pods: Sequence[Request], capacity_milli: int, *, seed: int, tune: float = FGD_TUNE
) -> list[Request]:
    """The pod list shuffled, then grown by random copies until its GPU request reaches ``tune`` × capacity.

    The FGD artifact's order (``SortClusterPods`` shuffles, then ``TunePodsByNodeTotalResource`` appends):
    every original pod arrives first, in random order, and the copies follow in the order they were drawn.
    Copies are appended while they do not overshoot the target; lists already above the target are trimmed
    by removing random pods. Copies get unique ids (``<id>-tuned-<n>``).
    """
    rng = random.Random(seed)
    target = tune * capacity_milli
    workload = list(pods)
    rng.shuffle(workload)
    total = sum(_request_milli(pod) for pod in workload)
    while total > target and workload:
        total -= _request_milli(workload.pop(rng.randrange(len(workload))))
    copies = 0
    while pods:
        pod = pods[rng.randrange(len(pods))]
        if total + _request_milli(pod) > target:
            break
        workload.append(replace(pod, id=f"{pod.id}-tuned-{copies}"))
        total += _request_milli(pod)
        copies += 1
    return workload


def _request_milli(request: Request) -> int:
    return member_milli(request) * request.members


def run_packing(
    nodes: Sequence[Node],
    pods: Sequence[Request],
    *,
    policy: str,
    seed: int,
    tune: float = FGD_TUNE,
    progress: ProgressCallback | None = None,
    verify: bool = False,
) -> PackingResult:
    """One packing run; deterministic for (nodes, pods, policy, seed).

    ``verify`` also asks the engine itself about every pod the random fast path decides (see
    ``fast_random.py``) and fails on the first difference: slow, for checking the prototype.
    """
    started = time.perf_counter()
    capacity_milli = sum(node.gpu_total for node in nodes) * MILLI_PER_GPU
    mix = size_mix_of(pods)  # FGD's "typical pods": the workload's own size distribution
    # ... and for the k8s-*/fgd-cpu policies the workload's own (CPU, GPU) specs, as the FGD artifact has them
    typical = typical_pods(pods) if policy in KUBE_POLICIES else None
    state = ClusterState.from_nodes(nodes, size_mix=mix, typical_pods=typical)
    fragments = FragmentTracker(state, mix)
    refused = RefusalMemory()
    mirror = FleetMirror(state)
    decider = _Decider(state, mirror, policy, seed, verify=verify)
    workload = inflate_and_shuffle(pods, capacity_milli, seed=seed, tune=tune)
    columns = math.floor(tune * 100 + 1e-9) + 1
    sums = [0.0] * columns
    counts = [0] * columns
    fragmentation: list[float | None] = [None] * columns
    failures: dict[str, int] = {}
    arrived = allocated = placed = 0
    tick = Throttle(progress, len(workload))
    for index, pod in enumerate(workload):
        arrived += _request_milli(pod)
        outcome = None if refused.implies_rejection(pod) else decider(pod, index)
        if isinstance(outcome, Placement):
            state.commit(outcome, pod)
            fragments.update(outcome.nodes)
            mirror.refresh(outcome.nodes)
            allocated += _request_milli(pod)
            placed += 1
        else:
            refused.remember(pod)
            key = f"{pod.gpus:g}"
            failures[key] = failures.get(key, 0) + 1
        column = math.floor(100 * arrived / capacity_milli + 0.5)
        if column < columns:
            sums[column] += 100 * allocated / capacity_milli
            counts[column] += 1
            if fragmentation[column] is None:
                fragmentation[column] = 100 * fragments.total_milli / capacity_milli
        tick(index + 1)
    if allocated != state.gpu_allocated_milli:
        raise AssertionError(
            f"allocation drifted: counted {allocated} milli-GPU, engine holds {state.gpu_allocated_milli}"
        )
    return PackingResult(
        policy=policy,
        seed=seed,
        capacity_gpus=capacity_milli // MILLI_PER_GPU,
        pods_submitted=len(workload),
        pods_placed=placed,
        allocation_pct=tuple(round(s / c, 4) if c else None for s, c in zip(sums, counts, strict=True)),
        fragmentation_pct=tuple(None if f is None else round(f, 4) for f in fragmentation),
        arrived_pct_final=100 * arrived / capacity_milli,
        wall_time_s=time.perf_counter() - started,
        failures_by_size=dict(sorted(failures.items())),
    )


class _Decider:
    """Who decides each pod: CPU-only pods the simulator's rule, ``random`` one-member pods the fast
    path that reproduces the engine's decision, everything else ``ClusterState.place``."""

    def __init__(self, state: ClusterState, mirror: FleetMirror, policy: str, seed: int, *, verify: bool) -> None:
        self.state = state
        self.policy = policy
        self.seed = seed
        self.verify = verify
        self.cpu_only = CpuOnlyPlacer(mirror)
        self.random = RandomSinglePlacer(state, mirror) if policy == "random" else None

    def __call__(self, pod: Request, index: int) -> Placement | Rejection:
        run_seed = self.seed * 1_000_003 + index
        if pod.gpus == 0 and self.policy not in KUBE_POLICIES:  # k8s-* and fgd-cpu place CPU-only pods themselves
            return self.cpu_only.place(pod, self.policy, seed=run_seed)
        if self.random is None:
            return self.state.place(pod, self.policy, seed=run_seed)
        outcome = self.random.place(pod, seed=run_seed)
        if self.verify:
            engine = self.state.place(pod, self.policy, seed=run_seed)
            same = type(engine) is type(outcome) and (
                not isinstance(engine, Placement) or engine == outcome
            )
            if not same:
                raise AssertionError(f"random fast path differs from the engine on {pod.id}: {outcome} != {engine}")
        return outcome


class FragmentTracker:
    """Fleet fragmentation (engine definition) kept up to date node by node.

    Recomputing the whole fleet after each of ~10,000 arrivals would dominate a run; a placement only
    changes the nodes it lands on, so only those are re-measured.
    """

    def __init__(self, state: ClusterState, mix: SizeMix) -> None:
        self.state = state
        self.mix = normalised_mix(mix)
        self.by_node = {node.name: self._measure(node) for node in state.nodes()}
        self.total_milli = sum(self.by_node.values())

    def _measure(self, node: Node) -> float:
        return expected_fragment_milli(node.free_milli(), self.mix) if node.schedulable and self.mix else 0.0

    def update(self, names: Sequence[str]) -> None:
        for name in names:
            value = self._measure(self.state.node(name))
            self.total_milli += value - self.by_node[name]
            self.by_node[name] = value


class RefusalMemory:
    """Pods the engine already refused, to skip asking again about pods that cannot fit either.

    Packing never deletes pods, so free capacity only shrinks: once the engine rejects a pod, any later
    pod of the same GPU kind and models asking for at least as many GPUs (or milli-GPUs), CPU and
    memory is rejected too. This is the engine's own earlier decision applied again, not a new one;
    it saves most of the run time once the fleet is nearly full.
    """

    def __init__(self) -> None:
        self.refused: dict[tuple[bool, frozenset[str]], list[tuple[int, int, int]]] = {}

    @staticmethod
    def _key(pod: Request) -> tuple[tuple[bool, frozenset[str]], tuple[int, int, int]]:
        need = (_request_milli(pod), pod.cpu_milli, pod.memory_mib)
        return (bool(pod.gpu_milli), pod.gpu_models), need

    def implies_rejection(self, pod: Request) -> bool:
        key, need = self._key(pod)
        return any(all(n >= r for n, r in zip(need, old, strict=True)) for old in self.refused.get(key, ()))

    def remember(self, pod: Request) -> None:
        if pod.members != 1:
            return  # gangs have more ways to fail than their totals show
        key, need = self._key(pod)
        known = self.refused.setdefault(key, [])
        if not any(all(n >= r for n, r in zip(need, old, strict=True)) for old in known):
            known[:] = [old for old in known if not all(o >= n for o, n in zip(old, need, strict=True))]
            known.append(need)
