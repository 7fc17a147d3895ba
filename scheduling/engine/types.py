"""The engine's vocabulary: frozen dataclasses in, frozen dataclasses out.

Everything outside the engine (selectors, collectors, trace readers, the simulator) speaks to it in
these types, so they are the contract between layers. Times are plain floats in seconds from an
epoch the caller chooses: the engine never reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any, TypeVar

MILLI_PER_GPU = 1000

_Type = TypeVar("_Type", bound=type)


def quick_pickle(cls: _Type) -> _Type:
    """Pickle a frozen slots dataclass as the tuple of its fields, read by one C-level ``attrgetter``.

    The state methods ``dataclass(slots=True)`` adds call ``fields()`` for every object; a pool snapshot
    cached for other processes holds thousands of nodes, requests and running workloads, and that was about
    a sixth of a cold "my workloads" render. Unpickling sets the same fields again (no ``__init__``)."""
    names = tuple(f.name for f in fields(cls))
    state: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)

    def getstate(self: Any) -> tuple[Any, ...]:
        return state(self)

    def setstate(self: Any, values: tuple[Any, ...]) -> None:
        for name, value in zip(names, values, strict=True):
            object.__setattr__(self, name, value)

    setattr(cls, "__getstate__", getstate)  # noqa: B010 (a method on a class object, not an attribute)
    setattr(cls, "__setstate__", setstate)  # noqa: B010
    return cls


class OrchestratorKind(StrEnum):
    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    RAY = "ray"


class WorkloadKind(StrEnum):
    TRAINING = "training"
    HPO = "hpo"
    INFERENCE = "inference"
    BATCH = "batch"


class TopologyLevel(StrEnum):
    """How tightly a gang must sit, from tightest to loosest (Volcano HyperNode tiers, Slurm --switches)."""

    NVLINK_DOMAIN = "nvlink_domain"
    LEAF_SWITCH = "leaf_switch"
    SPINE = "spine"
    ANY = "any"


@quick_pickle
@dataclass(frozen=True, slots=True)
class Node:
    """One host as the engine sees it.

    ``gpu_free_milli`` holds the free share of each GPU (1000 = a whole free GPU); an empty tuple means
    every GPU is wholly free. CPU and memory of 0 total mean "not tracked" and never constrain.
    """

    name: str
    gpu_total: int
    gpu_model: str = ""
    gpu_free_milli: tuple[int, ...] = ()
    cpu_milli_total: int = 0
    cpu_milli_free: int = 0
    memory_mib_total: int = 0
    memory_mib_free: int = 0
    nvlink_domain: str = ""
    leaf_switch: str = ""
    spine: str = ""
    orchestrator: str = ""
    pinned: bool = False
    schedulable: bool = True

    def free_milli(self) -> tuple[int, ...]:
        return self.gpu_free_milli or (MILLI_PER_GPU,) * self.gpu_total

    @property
    def gpu_free_whole(self) -> int:
        return sum(1 for milli in self.free_milli() if milli == MILLI_PER_GPU)

    @property
    def gpu_allocated(self) -> int:
        """GPUs not wholly free (a GPU shared by a fractional pod counts as allocated)."""
        return self.gpu_total - self.gpu_free_whole


@quick_pickle
@dataclass(frozen=True, slots=True)
class Request:
    """Demand for a gang: ``members`` x (``gpus_per_member`` whole GPUs or ``gpu_milli`` of one GPU).

    ``gpu_milli`` in 1..999 asks for a fractional share of a single GPU (GPU-sharing pods); then
    ``gpus_per_member`` must be 0. ``gpu_models`` empty means any model.
    """

    id: str
    members: int = 1
    gpus_per_member: int = 1
    gpu_milli: int = 0
    gpu_models: frozenset[str] = frozenset()
    cpu_milli: int = 0
    memory_mib: int = 0
    topology: TopologyLevel = TopologyLevel.ANY
    topology_required: bool = False
    team: str = ""
    priority: int = 0
    kind: WorkloadKind = WorkloadKind.BATCH
    duration_estimate_s: float = 0.0
    submitted_at: float = 0.0
    orchestrator: str = ""
    latency_sla_ms: float | None = None

    @property
    def gpus(self) -> float:
        if self.gpu_milli:
            return self.members * self.gpu_milli / MILLI_PER_GPU
        return float(self.members * self.gpus_per_member)


@quick_pickle
@dataclass(frozen=True, slots=True)
class MemberAssignment:
    member: int
    node: str
    gpu_indices: tuple[int, ...]
    gpu_milli: int = MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class Placement:
    request_id: str
    assignments: tuple[MemberAssignment, ...]
    topology: TopologyLevel
    score: float = 0.0
    reasons: tuple[str, ...] = ()

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.node for a in self.assignments))


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a request could not be placed: what the UI shows as "why is my job pending"."""

    request_id: str
    constraint: str
    message: str
    free_gpus: int = 0
    unusable_free_gpus: int = 0


@quick_pickle
@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """Work holding GPUs now: the input to preemption and fair-share usage."""

    id: str
    team: str
    gpus: float
    assignments: tuple[MemberAssignment, ...] = ()
    priority: int = 0
    started_at: float = 0.0
    gang_id: str = ""
    preemptible: bool = True
    kind: WorkloadKind = WorkloadKind.BATCH
    expected_end: float | None = None
    """When the work is expected to finish (start + time limit); None means unknown (never, for backfill)."""


@dataclass(frozen=True, slots=True)
class TeamSpec:
    """A node of the team tree: ``weight`` is the % of the parent's share; GPUs are absolute."""

    name: str
    parent: str | None = None
    weight: float = 0.0
    guaranteed: int = 0
    burst_limit: int | None = None
    gpu_model: str = ""


@dataclass(frozen=True, slots=True)
class Entitlement:
    team: str
    guaranteed: float
    fair_share: float
    limit: float
    demand: float
    allocation: float
    reasons: tuple[str, ...] = field(default=())
    in_use: float = 0.0
    """GPUs the team holds now (the ``allocation`` argument of ``entitlements``), for borrowing checks."""

    @property
    def borrowed(self) -> float:
        """GPUs held above the guaranteed floor: the part other teams may reclaim."""
        return max(0.0, self.in_use - self.guaranteed)


SizeMix = Mapping[float, float]
"""Observed request sizes: GPUs per member (fractions for shared GPUs) -> relative weight."""


@dataclass(frozen=True, slots=True)
class Victim:
    """One running workload a preemption plan would stop, and why it was chosen."""

    workload_id: str
    team: str
    gpus: float
    priority: int
    gang_id: str
    work_lost_gpu_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class VictimPlan:
    """A preemption decision (never executed by the engine): stop ``victims``, then start ``placement``."""

    request_id: str
    victims: tuple[Victim, ...]
    placement: Placement
    reasons: tuple[str, ...] = ()

    @property
    def work_lost_gpu_s(self) -> float:
        return sum(v.work_lost_gpu_s for v in self.victims)


@dataclass(frozen=True, slots=True)
class BackfillDecision:
    """EASY backfill outcome: what starts now, and when the blocked queue head is promised to start."""

    start_now: tuple[Placement, ...]
    head_id: str | None = None
    head_reservation_at: float | None = None
    head_reservation_nodes: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def started_ids(self) -> tuple[str, ...]:
        return tuple(p.request_id for p in self.start_now)


@dataclass(frozen=True, slots=True)
class RoutingDecision:
    orchestrator: str
    reasons: tuple[str, ...] = ()
    rule: str = ""
