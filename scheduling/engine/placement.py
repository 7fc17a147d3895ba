"""Gang placement on a GPU fleet: first-fit, best-fit, FGD and a seeded random floor.

``ClusterState`` is the fast mutable view the simulator and the engine rounds use; ``place`` is the
one-shot convenience over a tuple of frozen nodes. Both only *decide*: committing a placement is a
separate, checked step, so a decision can be shown ("why here?") before anything is reserved.

Semantics (what Volcano / Slurm / Kueue users expect):

* a gang is placed whole or not at all;
* topology is tried tightest first: one NVLink domain, one leaf switch, one spine, then the fewest
  switches; ``topology_required`` makes ``request.topology`` the loosest acceptable level;
* members need whole GPUs (``gpus_per_member``) or a share of one GPU (``gpu_milli``), plus CPU and
  memory per member where nodes track them; unschedulable nodes are never used.

Policies pick, at each topology level, the group (NVLink domain, leaf, spine) and then the nodes:
first-fit takes the first, best-fit the tightest that fits, random a seeded choice. FGD compares
fragmentation growth wherever a choice is between single nodes (every single-node request, and the
member-by-member fill inside the chosen group); between multi-node groups it uses best fit, because
simulating a whole gang in every candidate switch would cost more than it tells.

Speed: single-member requests (whole GPUs or one GPU share, the bulk of any queue) never scan the
fleet. Nodes are indexed by (model, whole free GPUs) for first/best fit, and by (model, sorted free
vector) for FGD and GPU shares: nodes with the same free vector have the same fragmentation delta, so
FGD evaluates one signature per distinct state and caches deltas until the request-size mix changes.
Gangs look only at nodes in buckets with enough free GPUs.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from scheduling.engine._buckets import LazyBuckets
from scheduling.engine._fgd import FgdScorer, Signature, take
from scheduling.engine._topology import LEVELS, level_rank, topology_keys
from scheduling.engine.kube_score import (
    FGD_SCORED,
    GANG_FALLBACK,
    KUBE_POLICIES,
    FragmentModel,
    NodeView,
    TypicalPod,
    best_fit_leftover,
    best_fit_score,
    fgd_choice,
    fgd_gpu_in_index_order,
    fullest_fitting,
    member_fits,
    pick_gpu,
    pod_spec,
    stranding_growth,
    typical_pods_from_mix,
)
from scheduling.engine.sizemix import SizeMixTracker, member_milli
from scheduling.engine.types import (
    MILLI_PER_GPU,
    MemberAssignment,
    Node,
    Placement,
    Rejection,
    Request,
    SizeMix,
    TopologyLevel,
)
from scheduling.wording import plural

POLICIES = ("first-fit", "best-fit", "fgd", "random", *KUBE_POLICIES)
FAST_POLICIES = frozenset({"first-fit", "best-fit", "fgd"})

_Accept = Callable[[int], bool]


@dataclass(frozen=True, slots=True)
class Shape:
    """What one member of a request needs on a node."""

    gpus: int
    milli: int
    cpu: int
    memory: int

    @property
    def fractional(self) -> bool:
        return self.milli < MILLI_PER_GPU

    @classmethod
    def of(cls, request: Request) -> Shape:
        return cls(request.gpus_per_member if not request.gpu_milli else 0, member_milli(request),
                   request.cpu_milli, request.memory_mib)


def invalid_request(request: Request) -> str:
    """Why a request is malformed, or "" when it is well formed."""
    if request.members < 1:
        return "a gang needs at least one member"
    if request.gpu_milli and request.gpus_per_member:
        return "a fractional request (gpu_milli) must ask for gpus_per_member=0"
    if not 0 <= request.gpu_milli < MILLI_PER_GPU:
        return "gpu_milli must be between 1 and 999 (use gpus_per_member for whole GPUs)"
    if not request.gpu_milli and request.gpus_per_member < 1:
        return "a member needs at least one GPU or a gpu_milli share"
    if request.cpu_milli < 0 or request.memory_mib < 0:
        return "CPU and memory requests cannot be negative"
    return ""


class ClusterState:
    """Mutable, indexed free capacity of a fleet. Decide with ``place``, then ``commit`` / ``release``."""

    def __init__(
        self, nodes: Iterable[Node], size_mix: SizeMix | None = None, *,
        typical_pods: Sequence[TypicalPod] | None = None,
    ) -> None:
        self._static: tuple[Node, ...] = tuple(nodes)
        self._typical = tuple(typical_pods) if typical_pods is not None else None
        self._kube: _KubeClasses | None = None
        self._index = {node.name: i for i, node in enumerate(self._static)}
        if len(self._index) != len(self._static):
            raise ValueError("node names must be unique")
        self._free = [self._initial_free(node) for node in self._static]
        self._whole = [0] * len(self._static)
        self._cpu_free = [node.cpu_milli_free for node in self._static]
        self._mem_free = [node.memory_mib_free for node in self._static]
        self._models = sorted({node.gpu_model for node in self._static})
        self._model_ids = {model: i for i, model in enumerate(self._models)}
        self._model_of = [self._model_ids[node.gpu_model] for node in self._static]
        self._whole_by_model = [0] * len(self._models)
        topology = topology_keys(self._static)
        self._topology = topology
        self._nvlink_is_node = len(set(topology[TopologyLevel.NVLINK_DOMAIN])) == len(self._static)
        self._max_gpus = max((node.gpu_total for node in self._static), default=0)
        self._buckets: LazyBuckets[tuple[int, int]] = LazyBuckets(len(self._static))
        self._sigs: LazyBuckets[tuple[int, Signature]] = LazyBuckets(len(self._static))
        self._fgd = FgdScorer(SizeMixTracker(size_mix))
        self.version = 0  # bumped by every commit, release and observed request: "has anything changed?"
        for i in range(len(self._static)):
            self._whole[i] = sum(1 for milli in self._free[i] if milli >= MILLI_PER_GPU)
            self._reindex(i, previous_whole=0)

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[Node], size_mix: SizeMix | None = None, *,
        typical_pods: Sequence[TypicalPod] | None = None,
    ) -> ClusterState:
        return cls(nodes, size_mix, typical_pods=typical_pods)

    @staticmethod
    def _initial_free(node: Node) -> list[int]:
        free = list(node.free_milli())
        if len(free) != node.gpu_total or any(not 0 <= milli <= MILLI_PER_GPU for milli in free):
            raise ValueError(f"node {node.name}: gpu_free_milli must hold gpu_total values in 0..1000")
        return free

    def copy(self) -> ClusterState:
        """An independent state to try decisions on (what-if, backfill shadows, preemption trials)."""
        clone = object.__new__(ClusterState)
        for name in ("_static", "_index", "_models", "_model_ids", "_model_of", "_topology",
                     "_nvlink_is_node", "_max_gpus", "_typical"):
            setattr(clone, name, getattr(self, name))
        clone._kube = None  # rebuilt on first use (the k8s-* policies are not used on copies in hot loops)
        clone._free = [list(free) for free in self._free]
        clone._whole = list(self._whole)
        clone._cpu_free = list(self._cpu_free)
        clone._mem_free = list(self._mem_free)
        clone._whole_by_model = list(self._whole_by_model)
        clone._buckets = self._buckets.copy()
        clone._sigs = self._sigs.copy()
        clone._fgd = self._fgd.copy()
        clone.version = self.version
        return clone

    # ----------------------------------------------------------------------------- views
    @property
    def gpu_total(self) -> int:
        """GPUs in the fleet, schedulable or not."""
        return sum(node.gpu_total for node in self._static)

    @property
    def gpu_free(self) -> int:
        """Wholly free GPUs on schedulable nodes."""
        return sum(self._whole_by_model)

    @property
    def gpu_allocated_milli(self) -> int:
        """Milli-GPUs in use anywhere (fractional shares included)."""
        capacity = sum(node.gpu_total for node in self._static) * MILLI_PER_GPU
        return capacity - sum(sum(free) for free in self._free)

    @property
    def size_mix(self) -> dict[float, float]:
        """The normalised request-size mix FGD currently measures against."""
        return self._fgd.mix.as_mix()

    def nodes(self) -> tuple[Node, ...]:
        """Frozen nodes carrying the current free GPUs, CPU and memory, in the order they were given
        (which is also the engine's node order: ``free_vector(i)`` is ``nodes()[i]``'s)."""
        return tuple(
            replace(node, gpu_free_milli=tuple(self._free[i]), cpu_milli_free=self._cpu_free[i],
                    memory_mib_free=self._mem_free[i])
            for i, node in enumerate(self._static)
        )

    def node(self, name: str) -> Node:
        i = self._index[name]
        return replace(self._static[i], gpu_free_milli=tuple(self._free[i]),
                       cpu_milli_free=self._cpu_free[i], memory_mib_free=self._mem_free[i])

    @property
    def node_count(self) -> int:
        return len(self._static)

    def index_of(self, name: str) -> int:
        """Position of node ``name`` (KeyError if unknown): the key the fast helpers below take."""
        return self._index[name]

    def node_name(self, i: int) -> str:
        return self._static[i].name

    def free_vector(self, i: int) -> list[int]:
        """A copy of node ``i``'s free milli-GPUs per GPU."""
        return list(self._free[i])

    def can_host(self, i: int, request: Request, shape: Shape | None = None) -> bool:
        """Whether node ``i`` is schedulable, of an allowed model, with CPU and memory for one member
        (pass ``shape`` when asking about many nodes for one request)."""
        node = self._static[i]
        if not node.schedulable or (request.gpu_models and node.gpu_model not in request.gpu_models):
            return False
        return self._host_fits(i, shape or Shape.of(request))

    def could_fit(self, request: Request) -> bool:
        """False when ``place`` would certainly reject ``request`` now, judged by GPU counts alone (O(1) in
        the fleet size): it is malformed, needs more wholly free GPUs than the fleet has, or more members
        than the nodes of its models have room for by whole GPUs. True means "ask ``place``"."""
        if invalid_request(request):
            return False
        if request.gpu_milli:
            return True
        if request.gpus > self.gpu_free:
            return False
        if request.members == 1:
            return True  # place() answers a single member from its buckets anyway
        return self._member_slots(self._allowed_models(request), request.gpus_per_member) >= request.members

    def _member_slots(self, models: Iterable[int], need: int) -> int:
        """How many members of ``need`` whole GPUs the schedulable nodes of ``models`` hold, node by node."""
        return sum(
            self._buckets.count((model, whole)) * (whole // need)
            for model in models
            for whole in range(need, self._max_gpus + 1)
        )

    def observe_request(self, request: Request) -> None:
        """Count a request in the size mix FGD uses (FGD learns the workload from what it sees)."""
        self._fgd.mix.observe(request)
        self.version += 1

    # ----------------------------------------------------------------------------- indexing
    def _reindex(self, i: int, previous_whole: int) -> None:
        """Keep the buckets and signatures of node ``i`` in step with its free GPUs."""
        if not self._static[i].schedulable:
            return
        model = self._model_of[i]
        whole = self._whole[i]
        self._whole_by_model[model] += whole - previous_whole
        self._buckets.move(i, (model, whole))
        self._sigs.move(i, (model, tuple(sorted(self._free[i]))))

    def _host_fits(self, i: int, shape: Shape, members: int = 1) -> bool:
        """CPU and memory for ``members`` members on node ``i`` (untracked resources always fit)."""
        node = self._static[i]
        if shape.cpu and node.cpu_milli_total and self._cpu_free[i] < shape.cpu * members:
            return False
        return not (shape.memory and node.memory_mib_total and self._mem_free[i] < shape.memory * members)

    def _allowed_models(self, request: Request) -> list[int]:
        if not request.gpu_models:
            return list(range(len(self._models)))
        return [self._model_ids[m] for m in sorted(request.gpu_models) if m in self._model_ids]

    # ----------------------------------------------------------------------------- deciding
    def place(self, request: Request, policy: str = "best-fit", *, seed: int = 0) -> Placement | Rejection:
        """Decide where ``request`` would go now; nothing is reserved until ``commit``."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")
        if policy in KUBE_POLICIES:
            if request.members != 1:
                return self.place(request, GANG_FALLBACK[policy], seed=seed)  # kube-scheduler has no gangs
            cpu_only = not request.gpus_per_member and not request.gpu_milli
            if cpu_only and request.cpu_milli >= 0 and request.memory_mib >= 0:
                return self._place_kube(request, policy, seed)  # a CPU-only pod: these policies place it too
        problem = invalid_request(request)
        if problem:
            return Rejection(request.id, "invalid", problem)
        allowed = self._allowed_models(request)
        if not allowed:
            return self._reject(request, Shape.of(request), allowed)
        shape = Shape.of(request)
        if policy in KUBE_POLICIES:
            return self._place_kube(request, policy, seed)
        if request.members == 1 and policy in FAST_POLICIES:
            if shape.fractional:
                return self._place_single_shared(request, shape, allowed, policy)
            return self._place_single_whole(request, shape, allowed, policy)
        rng = random.Random(f"{seed}:{request.id}")
        if request.members == 1 and policy == "random" and self._nvlink_is_node:
            return self._place_single_random(request, shape, allowed, rng)
        return self._place_general(request, shape, allowed, policy, rng)

    def _place_single_random(
        self, request: Request, shape: Shape, allowed: list[int], rng: random.Random
    ) -> Placement | Rejection:
        """The general path's decision for one member when every node is its own NVLink domain (one
        seeded draw among the nodes that fit, in node order), without computing slots fleet-wide."""
        needs_host = bool(shape.cpu or shape.memory)
        eligible = [i for i in self._candidate_nodes(shape, allowed)
                    if self._gpu_slots(i, shape) and (not needs_host or self._host_slots(i, shape))]
        if not eligible:
            return self._reject(request, shape, allowed)
        node = rng.choice(eligible)
        return self._build_placement(request, shape, [(node, 1)], TopologyLevel.NVLINK_DOMAIN, "random")

    def _place_single_whole(
        self, request: Request, shape: Shape, allowed: list[int], policy: str
    ) -> Placement | Rejection:
        needs_host = bool(shape.cpu or shape.memory)

        def host_ok(i: int) -> bool:
            return self._host_fits(i, shape)

        accept = host_ok if needs_host else None
        if policy == "fgd":
            chosen = self._fgd_single_whole(shape, allowed, accept)
        else:
            chosen = self._fit_single_whole(shape, allowed, accept, first=policy == "first-fit")
        if chosen is None:
            if not self._any_node_with_whole(shape.gpus, allowed):
                return self._quick_capacity_rejection(request, shape, allowed)
            return self._reject(request, shape, allowed)  # GPUs exist but CPU/memory do not: say which
        node, score = chosen
        if policy == "fgd":
            score /= MILLI_PER_GPU  # report fragmentation growth in GPUs
        name = self._static[node].name
        gpus = tuple(g for g, milli in enumerate(self._free[node]) if milli >= MILLI_PER_GPU)[: shape.gpus]
        reason = self._reason_single(policy, name, self._whole[node] - shape.gpus, score)
        return Placement(request.id, (MemberAssignment(0, name, gpus, MILLI_PER_GPU),),
                         TopologyLevel.NVLINK_DOMAIN, score, (reason,))

    def _place_single_shared(
        self, request: Request, shape: Shape, allowed: list[int], policy: str
    ) -> Placement | Rejection:
        """One share of one GPU, chosen among distinct node signatures rather than among nodes.

        fgd: least fragmentation growth; best-fit: the fullest GPU that fits; first-fit: the lowest node.
        """
        accept = (lambda i: self._host_fits(i, shape)) if shape.cpu or shape.memory else None
        allowed_set = set(allowed)
        ranked: list[tuple[float, int, int, Signature]] = []
        for model, sig in self._sigs.keys():  # noqa: SIM118 (LazyBuckets is not a dict)
            if model not in allowed_set or sig[-1] < shape.milli:  # signatures sort ascending
                continue
            if policy == "fgd":
                delta, value = self._fgd.choice(sig, shape.milli)
                ranked.append((delta, value, model, sig))
            else:
                value = min(v for v in sig if v >= shape.milli)
                first = self._sigs.first((model, sig)) if policy == "first-fit" else 0
                ranked.append((float(first or 0), value, model, sig))
        ranked.sort()
        for score, value, model, sig in ranked:
            node = self._sigs.first((model, sig), accept)
            if node is None:
                continue
            name = self._static[node].name
            gpu = self._pick_shared_gpu(self.free_vector(node), shape.milli, policy)
            reason = f"{policy}: GPU {gpu} of {name} ({value} milli free before)"
            return Placement(request.id, (MemberAssignment(0, name, (gpu,), shape.milli),),
                             TopologyLevel.NVLINK_DOMAIN, score / MILLI_PER_GPU if policy == "fgd" else score,
                             (reason,))
        return self._reject(request, shape, allowed)

    # ----------------------------------------------------------------------------- k8s-*, fgd-cpu, fgd-strand
    def _kube_classes(self) -> _KubeClasses:
        if self._kube is None:
            typical = self._typical if self._typical is not None else typical_pods_from_mix(self._fgd.mix.normalised)
            by_name = sorted(range(len(self._static)), key=lambda i: self._static[i].name)
            rank = [0] * len(self._static)
            for position, i in enumerate(by_name):
                rank[i] = position
            self._kube = _KubeClasses(FragmentModel(typical), rank)
            for i in range(len(self._static)):
                self._kube.move(i, self._class_key(i))
        return self._kube

    def _class_key(self, i: int) -> NodeView | None:
        node = self._static[i]
        if not node.schedulable:
            return None
        return NodeView(node.gpu_model, tuple(sorted(self._free[i])),
                        self._cpu_free[i] if node.cpu_milli_total else math.inf,
                        self._mem_free[i] if node.memory_mib_total else math.inf)

    def _place_kube(self, request: Request, policy: str, seed: int) -> Placement | Rejection:
        """One pod, scored node class by node class (see ``kube_score``): the best score wins; ties go to the
        smallest node name (k8s-best-fit, k8s-fgd: the artifact's selectHost), are drawn at random (k8s-random),
        go to the tightest node by CPU and GPU, then the lowest index (fgd-cpu), or first to the node where the
        pod strands the fewest GPUs (fgd-strand)."""
        kube = self._kube_classes()
        spec = pod_spec(request)
        best: float | None = None
        tied: list[NodeView] = []
        for view in kube.views():
            if not member_fits(view, spec, request.memory_mib):
                continue
            score = kube.score(view, spec, policy)
            if best is None or score > best:
                best, tied = score, [view]
            elif score == best:
                tied.append(view)
        if not tied:
            if not spec[2]:
                return Rejection(request.id, "cpu", "no schedulable node has the CPU and memory this CPU-only pod "
                                 "asks for")
            return self._reject(request, Shape.of(request), self._allowed_models(request))
        rng = random.Random(f"{seed}:{request.id}")
        if policy == "fgd-cpu":
            view = min(tied, key=lambda v: (best_fit_leftover(v, spec), kube.first(v)))
            node = kube.first(view)
        elif policy == "fgd-strand":
            ratio = kube.fragments.cpu_per_gpu
            view = min(tied, key=lambda v: (stranding_growth(v, spec, ratio), best_fit_leftover(v, spec),
                                            kube.first(v)))
            node = kube.first(view)
        elif policy == "k8s-random":
            node = kube.draw(tied, rng)
        else:
            node = kube.first_named(tied)
        return self._kube_placement(request, spec, node, policy, float(best or 0.0), rng)

    def _kube_placement(
        self, request: Request, spec: tuple[int, int, int, frozenset[str]], node: int, policy: str,
        score: float, rng: random.Random,
    ) -> Placement:
        _cpu, milli, gpus, _models = spec
        free = self._free[node]
        name = self._static[node].name
        if not gpus:
            assignment = MemberAssignment(0, name, (), 0)
        elif milli < MILLI_PER_GPU:
            view = self._class_key(node)
            assert view is not None
            fragments = self._kube_classes().fragments
            if policy == "k8s-fgd":
                gpu = fgd_gpu_in_index_order(view, free, spec, fragments)
            else:
                value = fgd_choice(view, spec, fragments)[1] if policy in FGD_SCORED else fullest_fitting(free, milli)
                gpu = pick_gpu(free, milli, policy, value, rng)
            assignment = MemberAssignment(0, name, (gpu,), milli)
        else:
            indices = tuple(g for g, left in enumerate(free) if left >= MILLI_PER_GPU)[:gpus]
            assignment = MemberAssignment(0, name, indices, MILLI_PER_GPU)
        ties = {"k8s-random": " (ties drawn at random)", "k8s-best-fit": " (ties: smallest name)",
                "k8s-fgd": " (ties: smallest name)"}
        reason = f"{policy}: {name} scores {score:g}" + ties.get(policy, "")
        return Placement(request.id, (assignment,), TopologyLevel.NVLINK_DOMAIN, score, (reason,))

    def _any_node_with_whole(self, gpus: int, allowed: list[int]) -> bool:
        return any(self._buckets.count((model, whole))
                   for whole in range(gpus, self._max_gpus + 1) for model in allowed)

    def _quick_capacity_rejection(self, request: Request, shape: Shape, allowed: list[int]) -> Rejection:
        """No node has enough whole GPUs: every free GPU of the allowed models is unusable to this request.
        Answered from the per-model counters, because a full fleet rejects most of what it sees."""
        free = sum(self._whole_by_model[model] for model in allowed)
        where = f"{plural(free, 'GPU')} free, none {shape.gpus} together" if free else "no GPU is free"
        return Rejection(request.id, "capacity",
                         f"needs {plural(shape.gpus, 'whole GPU')} on one node; {where}", free, free)

    @staticmethod
    def _reason_single(policy: str, name: str, whole_left: int, score: float) -> str:
        if policy == "fgd":
            return f"fgd: {name} grows expected fragmentation least (+{score:.3f} GPUs)"
        if policy == "best-fit":
            return f"best-fit: {name} is the fullest node that fits ({whole_left} whole GPUs left)"
        return f"first-fit: {name} is the first node that fits"

    def _fit_single_whole(
        self, shape: Shape, allowed: list[int], accept: _Accept | None, *, first: bool
    ) -> tuple[int, float] | None:
        """Best fit: the bucket with the fewest free GPUs that fits; first fit: the lowest index."""
        found: int | None = None
        for whole in range(shape.gpus, self._max_gpus + 1):
            for model in allowed:
                key = (model, whole)
                if not self._buckets.count(key):
                    continue
                node = self._buckets.first(key, accept)
                if node is None:
                    continue
                if not first:
                    return node, float(whole - shape.gpus)
                found = node if found is None else min(found, node)
        return None if found is None else (found, float(found))

    def _fgd_single_whole(
        self, shape: Shape, allowed: list[int], accept: _Accept | None
    ) -> tuple[int, float] | None:
        allowed_set = set(allowed)
        candidates: list[tuple[float, int, int, Signature]] = []
        for model, sig in self._sigs.keys():  # noqa: SIM118 (LazyBuckets is not a dict)
            if model not in allowed_set:
                continue
            whole = sig.count(MILLI_PER_GPU)
            if whole < shape.gpus:
                continue
            delta = self._fgd.choice(sig, shape.milli)[0]
            candidates.append((delta, whole - shape.gpus, model, sig))
        candidates.sort()
        for delta, _left, model, sig in candidates:
            node = self._sigs.first((model, sig), accept)
            if node is not None:
                return node, delta
        return None

    # ----------------------------------------------------------------------------- gangs
    def _slots(self, shape: Shape, allowed: Sequence[int]) -> dict[int, int]:
        """Members of ``shape`` each eligible node can host now (only nodes with at least one), in node
        order. Whole-GPU shapes only look at the buckets that have enough free GPUs, so a busy fleet
        costs what its free nodes cost, not what the whole fleet costs."""
        slots: dict[int, int] = {}
        for i in self._candidate_nodes(shape, allowed):
            count = self._gpu_slots(i, shape)
            if count and (shape.cpu or shape.memory):
                count = min(count, self._host_slots(i, shape))
            if count:
                slots[i] = count
        return slots

    def _candidate_nodes(self, shape: Shape, allowed: Sequence[int]) -> list[int]:
        """Schedulable nodes of an allowed model with room for one member's GPUs, in node order."""
        candidates: list[int] = []
        if shape.fractional:
            allowed_set = set(allowed)
            for model, sig in self._sigs.keys():  # noqa: SIM118 (LazyBuckets is not a dict)
                if model in allowed_set and sig and sig[-1] >= shape.milli:  # signatures sort ascending
                    candidates.extend(self._sigs.members((model, sig)))
            candidates.sort()
            return candidates
        for whole in range(shape.gpus, self._max_gpus + 1):
            for model in allowed:
                if self._buckets.count((model, whole)):
                    candidates.extend(self._buckets.members((model, whole)))
        candidates.sort()
        return candidates

    def _gpu_slots(self, i: int, shape: Shape) -> int:
        if shape.fractional:
            return sum(milli // shape.milli for milli in self._free[i])
        return self._whole[i] // shape.gpus

    def _host_slots(self, i: int, shape: Shape, *, cpu: bool = True, memory: bool = True) -> int:
        node = self._static[i]
        count = 1 << 30
        if cpu and shape.cpu and node.cpu_milli_total:
            count = min(count, self._cpu_free[i] // shape.cpu)
        if memory and shape.memory and node.memory_mib_total:
            count = min(count, self._mem_free[i] // shape.memory)
        return count

    def _place_general(
        self, request: Request, shape: Shape, allowed: list[int], policy: str, rng: random.Random
    ) -> Placement | Rejection:
        slots = self._slots(shape, allowed)
        if sum(slots.values()) < request.members:
            return self._reject(request, shape, allowed)
        loosest = level_rank(request.topology) if request.topology_required else len(LEVELS) - 1
        for rank in range(loosest + 1):
            plan = self._plan_at_level(rank, slots, request.members, shape, policy, rng)
            if plan is not None:
                return self._build_placement(request, shape, plan, LEVELS[rank], policy)
        level = request.topology.value.replace("_", " ")
        return self._reject(request, shape, allowed,
                            topology=f"the gang fits the fleet but not inside one {level} (hard constraint)")

    def _plan_at_level(
        self, rank: int, slots: dict[int, int], members: int, shape: Shape, policy: str, rng: random.Random
    ) -> list[tuple[int, int]] | None:
        """(node, members) pairs inside the best group of level ``LEVELS[rank]``, or None if no group fits."""
        keys = self._topology[LEVELS[rank]]
        groups: dict[str, list[int]] = {}
        capacity: dict[str, int] = {}
        for node, count in slots.items():
            key = keys[node]
            groups.setdefault(key, []).append(node)
            capacity[key] = capacity.get(key, 0) + count
        feasible = [key for key in groups if capacity[key] >= members]
        if not feasible:
            return None
        if policy == "fgd" and all(len(groups[key]) == 1 for key in feasible):
            chosen = self._fgd_pick_single_node_group(feasible, groups, members, shape)
        elif policy == "first-fit":
            chosen = feasible[0]
        elif policy == "random":
            chosen = rng.choice(feasible)
        else:  # best fit, and FGD between multi-node groups: the tightest group that fits
            chosen = min(feasible, key=lambda key: capacity[key])
        group_slots = {node: slots[node] for node in groups[chosen]}
        return self._fill(rank, group_slots, members, shape, policy, rng)

    def _fgd_pick_single_node_group(
        self, feasible: list[str], groups: dict[str, list[int]], members: int, shape: Shape
    ) -> str:
        """FGD across nodes: the node whose fragmentation grows least when it takes the whole gang."""
        growth_by_sig: dict[Signature, float] = {}
        best_key, best_score = feasible[0], (float("inf"), 0)
        for key in feasible:
            node = groups[key][0]
            sig = tuple(sorted(self._free[node]))
            growth = growth_by_sig.get(sig)
            if growth is None:
                growth = self._fgd.growth(sig, shape.milli, members)
                growth_by_sig[sig] = growth
            score = (growth, sum(self._free[node]))
            if score < best_score:
                best_key, best_score = key, score
        return best_key

    def _fill(
        self, rank: int, slots: dict[int, int], members: int, shape: Shape, policy: str, rng: random.Random
    ) -> list[tuple[int, int]]:
        """Spread ``members`` over a group using the fewest sub-groups (switches), then nodes by policy."""
        child_rank = rank - 1
        if child_rank < 0 or (child_rank == 0 and self._nvlink_is_node):
            return self._fill_nodes(slots, members, shape, policy, rng)
        keys = self._topology[LEVELS[child_rank]]
        children: dict[str, dict[int, int]] = {}
        for node, count in slots.items():
            children.setdefault(keys[node], {})[node] = count
        capacity = {key: sum(child.values()) for key, child in children.items()}
        plan: list[tuple[int, int]] = []
        remaining = members
        for key in _fewest_covering(capacity, members):
            share = min(capacity[key], remaining)
            plan.extend(self._fill(child_rank, children[key], share, shape, policy, rng))
            remaining -= share
        return plan

    def _fill_nodes(
        self, slots: dict[int, int], members: int, shape: Shape, policy: str, rng: random.Random
    ) -> list[tuple[int, int]]:
        if policy == "fgd":
            return self._fill_nodes_fgd(slots, members, shape)
        nodes = list(slots)
        if policy == "best-fit":
            nodes.sort(key=lambda i: (sum(self._free[i]), i))  # fullest first: fill the holes
        elif policy == "random":
            rng.shuffle(nodes)
        plan: list[tuple[int, int]] = []
        remaining = members
        for node in nodes:
            take = min(slots[node], remaining)
            plan.append((node, take))
            remaining -= take
            if not remaining:
                break
        return plan

    def _fill_nodes_fgd(self, slots: dict[int, int], members: int, shape: Shape) -> list[tuple[int, int]]:
        """Member by member, the node whose signature grows fragmentation least (ties: fullest)."""
        left = dict(slots)
        sig_of = {node: tuple(sorted(self._free[node])) for node in slots}
        by_sig: dict[Signature, list[int]] = {}
        for node in slots:
            by_sig.setdefault(sig_of[node], []).append(node)
        taken: dict[int, int] = {}
        for _ in range(members):
            sig = min((s for s, heap in by_sig.items() if heap),
                      key=lambda s: (self._fgd.choice(s, shape.milli)[0], sum(s), s))
            node = heapq.heappop(by_sig[sig])
            taken[node] = taken.get(node, 0) + 1
            left[node] -= 1
            new_sig = take(sig, shape.milli, self._fgd.choice(sig, shape.milli)[1])
            sig_of[node] = new_sig
            if left[node]:
                heapq.heappush(by_sig.setdefault(new_sig, []), node)
        return list(taken.items())

    def _build_placement(
        self, request: Request, shape: Shape, plan: list[tuple[int, int]], level: TopologyLevel, policy: str
    ) -> Placement:
        assignments: list[MemberAssignment] = []
        for node, count in plan:
            free = list(self._free[node])
            name = self._static[node].name
            for _ in range(count):
                if shape.fractional:
                    gpu = self._pick_shared_gpu(free, shape.milli, policy)
                    free[gpu] -= shape.milli
                    assignments.append(MemberAssignment(len(assignments), name, (gpu,), shape.milli))
                else:
                    gpus = tuple(g for g, milli in enumerate(free) if milli >= MILLI_PER_GPU)[: shape.gpus]
                    for g in gpus:
                        free[g] = 0
                    assignments.append(MemberAssignment(len(assignments), name, gpus, MILLI_PER_GPU))
        used = len(plan)
        where = level.value.replace("_", " ")
        spread = f"{policy}: {plural(request.members, 'member')} on {plural(used, 'node')}"
        reason = f"{spread} inside one {where}"
        if level is TopologyLevel.ANY:
            reason = f"{spread} across the fewest switches"
        return Placement(request.id, tuple(assignments), level, float(used), (reason,))

    def _pick_shared_gpu(self, free: list[int], milli: int, policy: str) -> int:
        fitting = [g for g, value in enumerate(free) if value >= milli]
        if policy == "first-fit":
            return fitting[0]
        if policy == "fgd":
            value = self._fgd.choice(tuple(sorted(free)), milli)[1]
            return next(g for g in fitting if free[g] == value)
        return min(fitting, key=lambda g: (free[g], g))  # fullest GPU that fits

    # ----------------------------------------------------------------------------- rejecting
    def _reject(
        self, request: Request, shape: Shape, allowed: Sequence[int], topology: str = ""
    ) -> Rejection:
        """Name the first constraint that fails, and how much free GPU capacity it left unusable."""
        allowed_set = set(allowed)
        eligible = [i for i, node in enumerate(self._static)
                    if node.schedulable and self._model_of[i] in allowed_set]
        if not eligible:
            wanted = ", ".join(sorted(request.gpu_models)) or "any"
            return Rejection(request.id, "gpu_model", f"no schedulable node offers GPU model {wanted}")
        free_milli = sum(self._whole[i] * MILLI_PER_GPU if not shape.fractional else sum(self._free[i])
                         for i in eligible)
        free = free_milli // MILLI_PER_GPU
        gpu_slots = [self._gpu_slots(i, shape) for i in eligible]
        members = request.members
        usable = min(sum(gpu_slots), members) * shape.milli // MILLI_PER_GPU
        if sum(gpu_slots) < members:
            return Rejection(request.id, "capacity",
                             f"needs {plural(members, 'member')} of {shape.milli / MILLI_PER_GPU:g} GPU; only"
                             f" {sum(gpu_slots)} fit now ({plural(free, 'GPU')} free, {max(0, free - usable)} of them"
                             " unusable for this shape)",
                             free, max(0, free - usable))
        for constraint, cpu, memory in (("cpu", True, False), ("memory", False, True)):
            fits = sum(min(s, self._host_slots(i, shape, cpu=cpu, memory=memory))
                       for i, s in zip(eligible, gpu_slots, strict=True))
            if fits < members:
                per_member = shape.cpu if cpu else shape.memory
                return Rejection(request.id, constraint,
                                 f"GPUs fit but {constraint} per member ({per_member})"
                                 f" leaves room for only {fits} of {plural(members, 'member')}",
                                 free, max(0, free - fits * shape.milli // MILLI_PER_GPU))
        if topology:
            return Rejection(request.id, "topology", topology, free, max(0, free - usable))
        return Rejection(request.id, "capacity", "no node fits CPU, memory and GPUs together",
                         free, max(0, free - usable))

    # ----------------------------------------------------------------------------- reserving
    def commit(self, placement: Placement, request: Request) -> None:
        """Reserve a placement's GPUs, CPU and memory; ValueError (and no change) if anything is short."""
        gpu_need, host_need = self._demand(placement, request)
        for (node, gpu), milli in gpu_need.items():
            if self._free[node][gpu] < milli:
                name = self._static[node].name
                raise ValueError(f"{name} GPU {gpu} has {self._free[node][gpu]} milli free, needs {milli}")
        for node, (cpu, memory) in host_need.items():
            static = self._static[node]
            if static.cpu_milli_total and self._cpu_free[node] < cpu:
                raise ValueError(f"{static.name} has {self._cpu_free[node]} milli-CPU free, needs {cpu}")
            if static.memory_mib_total and self._mem_free[node] < memory:
                raise ValueError(f"{static.name} has {self._mem_free[node]} MiB free, needs {memory}")
        self._apply(gpu_need, host_need, sign=-1)

    def release(self, placement: Placement, request: Request) -> None:
        """Return a committed placement's resources; ValueError (and no change) on a double release."""
        gpu_need, host_need = self._demand(placement, request)
        self._check_release(gpu_need, host_need, "this placement")
        self._apply(gpu_need, host_need, sign=1)

    def release_all(self, pairs: Sequence[tuple[Placement, Request]]) -> None:
        """Release several committed placements at once (the same end state as releasing them one by one,
        each node re-indexed once); ValueError and no change if any of them was not committed."""
        gpu_need: dict[tuple[int, int], int] = {}
        host_need: dict[int, tuple[int, int]] = {}
        for placement, request in pairs:
            gpus, host = self._demand(placement, request)
            for key, milli in gpus.items():
                gpu_need[key] = gpu_need.get(key, 0) + milli
            for node, (cpu, memory) in host.items():
                had_cpu, had_memory = host_need.get(node, (0, 0))
                host_need[node] = (had_cpu + cpu, had_memory + memory)
        self._check_release(gpu_need, host_need, "these placements")
        self._apply(gpu_need, host_need, sign=1)

    def release_committed(self, pairs: Iterable[tuple[Placement, Request]]) -> None:
        """``release_all`` without its checks, for placements the caller knows are committed on this state
        (or the state it was copied from): backfill's shadow releasing the running set, hundreds of times
        per replayed day. Releasing anything else corrupts the state."""
        gpu_need: dict[tuple[int, int], int] = {}
        host_need: dict[int, tuple[int, int]] = {}
        index = self._index
        for placement, request in pairs:
            cpu, memory = request.cpu_milli, request.memory_mib
            for assignment in placement.assignments:
                node = index[assignment.node]
                for gpu in assignment.gpu_indices:
                    gpu_need[(node, gpu)] = gpu_need.get((node, gpu), 0) + assignment.gpu_milli
                if cpu or memory:
                    had_cpu, had_memory = host_need.get(node, (0, 0))
                    host_need[node] = (had_cpu + cpu, had_memory + memory)
        self._apply(gpu_need, host_need, sign=1)

    def _check_release(
        self, gpu_need: dict[tuple[int, int], int], host_need: dict[int, tuple[int, int]], what: str
    ) -> None:
        """ValueError unless returning these GPUs, CPU and memory keeps every node within its capacity."""
        for (node, gpu), milli in gpu_need.items():
            if self._free[node][gpu] + milli > MILLI_PER_GPU:
                raise ValueError(f"{self._static[node].name} GPU {gpu} was not allocated to {what}")
        for node, (cpu, memory) in host_need.items():
            static = self._static[node]
            if static.cpu_milli_total and self._cpu_free[node] + cpu > static.cpu_milli_total:
                raise ValueError(f"{static.name}: releasing more CPU than the node has")
            if static.memory_mib_total and self._mem_free[node] + memory > static.memory_mib_total:
                raise ValueError(f"{static.name}: releasing more memory than the node has")

    def release_counter(self, request: Request) -> ReleaseCounter | None:
        """A counter that answers ``could_fit(request)`` as placements are released, without releasing them
        (None when GPU counts cannot decide: shares and malformed requests)."""
        if request.gpu_milli or invalid_request(request):
            return None
        return ReleaseCounter(self, request)

    def _demand(
        self, placement: Placement, request: Request
    ) -> tuple[dict[tuple[int, int], int], dict[int, tuple[int, int]]]:
        if placement.request_id != request.id:
            raise ValueError(f"placement is for {placement.request_id}, not {request.id}")
        if len(placement.assignments) != request.members:
            raise ValueError(f"{request.id} has {request.members} members, placement has "
                             f"{len(placement.assignments)}")
        gpu_need: dict[tuple[int, int], int] = {}
        host_need: dict[int, tuple[int, int]] = {}
        for assignment in placement.assignments:
            node = self._index.get(assignment.node)
            if node is None:
                raise ValueError(f"unknown node {assignment.node}")
            for gpu in assignment.gpu_indices:
                if not 0 <= gpu < len(self._free[node]):
                    raise ValueError(f"{assignment.node} has no GPU {gpu}")
                gpu_need[(node, gpu)] = gpu_need.get((node, gpu), 0) + assignment.gpu_milli
            cpu, memory = host_need.get(node, (0, 0))
            host_need[node] = (cpu + request.cpu_milli, memory + request.memory_mib)
        return gpu_need, host_need

    def _apply(
        self, gpu_need: dict[tuple[int, int], int], host_need: dict[int, tuple[int, int]], sign: int
    ) -> None:
        self.version += 1
        touched: dict[int, int] = {}
        for (node, gpu), milli in gpu_need.items():
            touched.setdefault(node, self._whole[node])
            self._free[node][gpu] += sign * milli
        for node, (cpu, memory) in host_need.items():
            if self._static[node].cpu_milli_total:
                self._cpu_free[node] += sign * cpu
            if self._static[node].memory_mib_total:
                self._mem_free[node] += sign * memory
        for node, previous in touched.items():
            self._whole[node] = self._free[node].count(MILLI_PER_GPU)  # a GPU never has more than 1000 free
            self._reindex(node, previous)
        if self._kube is not None:
            for node in touched.keys() | host_need.keys():
                self._kube.move(node, self._class_key(node))


class _KubeClasses:
    """Schedulable nodes grouped by identical state (``NodeView``), with scores cached per (state, pod)."""

    __slots__ = ("_members", "_rank", "_scores", "_view_of", "fragments")

    def __init__(self, fragments: FragmentModel, rank: Sequence[int]) -> None:
        self.fragments = fragments
        self._rank = rank  # each node's position in name order
        self._members: dict[NodeView, set[int]] = {}
        self._view_of: dict[int, NodeView] = {}
        self._scores: dict[tuple[NodeView, tuple[int, int, int, frozenset[str]], str], float] = {}

    def move(self, node: int, view: NodeView | None) -> None:
        old = self._view_of.pop(node, None)
        if old is not None:
            members = self._members[old]
            members.discard(node)
            if not members:
                del self._members[old]
        if view is not None:
            self._view_of[node] = view
            self._members.setdefault(view, set()).add(node)
        if len(self._scores) > 500_000:
            self._scores.clear()

    def views(self) -> Iterable[NodeView]:
        return self._members.keys()

    def first(self, view: NodeView) -> int:
        return min(self._members[view])

    def first_named(self, views: Sequence[NodeView]) -> int:
        """The node with the smallest name among all nodes of ``views`` (the artifact's selectHost)."""
        rank = self._rank.__getitem__
        return min((min(self._members[view], key=rank) for view in views), key=rank)

    def draw(self, views: Sequence[NodeView], rng: random.Random) -> int:
        """A node drawn uniformly among all nodes of ``views`` (kube-scheduler's random tie-break)."""
        total = sum(len(self._members[view]) for view in views)
        pick = rng.randrange(total)
        for view in views:
            members = self._members[view]
            if pick < len(members):
                return sorted(members)[pick]
            pick -= len(members)
        raise AssertionError("unreachable: pick < total")

    def score(self, view: NodeView, spec: tuple[int, int, int, frozenset[str]], policy: str) -> float:
        key = (view, spec, policy)
        cached = self._scores.get(key)
        if cached is None:
            if policy == "k8s-random":
                cached = 0.0
            elif policy == "k8s-best-fit":
                cached = float(best_fit_score(view, spec))
            else:
                cached = fgd_choice(view, spec, self.fragments)[0]
            self._scores[key] = cached
        return cached


class ReleaseCounter:
    """Whole-GPU counts of a ``ClusterState`` as committed placements are released on paper.

    ``release`` returns what ``state.could_fit(request)`` would answer had every placement counted so far
    been released: the state itself is not touched, so a caller walking ending work (backfill's
    reservation search) releases for real only once the counts say the request may fit.
    """

    __slots__ = ("_free", "_gpus", "_members", "_need", "_slots", "_state", "_total", "_wanted", "_whole")

    def __init__(self, state: ClusterState, request: Request) -> None:
        self._state = state
        self._need = request.gpus_per_member
        self._members = request.members
        self._gpus = request.gpus
        self._wanted = set(state._allowed_models(request))
        self._free: dict[int, list[int]] = {}
        self._whole: dict[int, int] = {}  # wholly free GPUs of touched nodes of wanted models
        self._total = state.gpu_free
        self._slots = state._member_slots(self._wanted, self._need)

    def fits(self) -> bool:
        return self._total >= self._gpus and self._slots >= self._members

    def release(self, placement: Placement) -> bool:
        state = self._state
        for assignment in placement.assignments:
            node = state._index[assignment.node]
            free = self._free.get(node)
            if free is None:
                free = self._free[node] = list(state._free[node])
            gained = 0  # GPUs of this assignment that become wholly free
            for gpu in assignment.gpu_indices:
                had = free[gpu]
                free[gpu] = min(MILLI_PER_GPU, had + assignment.gpu_milli)
                gained += had < MILLI_PER_GPU <= free[gpu]
            if gained and state._static[node].schedulable:
                self._total += gained
                if state._model_of[node] in self._wanted:
                    before = self._whole.get(node, state._whole[node])
                    self._whole[node] = before + gained
                    self._slots += (before + gained) // self._need - before // self._need
        return self.fits()


def _fewest_covering(capacity: dict[str, int], members: int) -> list[str]:
    """Fewest groups whose capacity covers ``members``: largest first, then swap the last pick for the
    smallest group that still covers the remainder (so a 2-member tail doesn't take an empty switch)."""
    ordered = sorted(capacity, key=lambda key: -capacity[key])
    chosen: list[str] = []
    covered = 0
    for key in ordered:
        chosen.append(key)
        covered += capacity[key]
        if covered >= members:
            break
    if chosen:
        last = chosen.pop()
        need = members - (covered - capacity[last])
        spare = [key for key in ordered if key not in chosen and capacity[key] >= need]
        chosen.append(min(spare, key=lambda key: capacity[key]) if spare else last)
    return chosen


def place(
    nodes: Sequence[Node], request: Request, policy: str = "best-fit", *, seed: int = 0,
    size_mix: SizeMix | None = None,
) -> Placement | Rejection:
    """One-shot placement on frozen nodes (builds a ``ClusterState``; use one directly for many)."""
    return ClusterState(nodes, size_mix).place(request, policy, seed=seed)

