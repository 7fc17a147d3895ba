"""What one collection round saw, as frozen dataclasses.

Observed types carry more than the engine needs (states, reasons, labels, taints, partitions) because
the UI explains "why is my job pending" and "why is this node not used" from them; ``to_node()``,
``to_request()`` and ``to_running()`` turn them into the engine's own types.

Times: ``Snapshot.taken_at`` is a timezone-aware UTC ``datetime`` (it is stored and shown); workload
``submitted_at``/``started_at`` are **epoch seconds as floats** (``None`` when unknown), the unit of the
engine's clocks, so no conversion sits between a snapshot and an engine round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from scheduling.engine.owners import Claim
from scheduling.engine.types import (
    MILLI_PER_GPU,
    Node,
    OrchestratorKind,
    Request,
    RunningWorkload,
    WorkloadKind,
)


class NodeCondition(StrEnum):
    """Whether a node takes work, in one vocabulary for every orchestrator (``collectors/conditions.py``
    reads each orchestrator's own words into it; nothing else parses them)."""

    READY = "ready"  # takes new work
    DRAINING = "draining"  # takes no new work (drained, cordoned, tainted, in maintenance); GPUs still in use
    DRAINED = "drained"  # takes no new work and no GPU is in use
    NOT_READY = "not_ready"  # the orchestrator says it cannot run work (Kubernetes Ready=False)
    DOWN = "down"  # down, not responding or failed (Slurm)
    UNKNOWN = "unknown"  # the orchestrator gives no usable answer (no Ready condition; Slurm state unknown)


class WorkloadState(StrEnum):
    RUNNING = "running"
    PENDING = "pending"
    HELD = "held"  # waiting on a user/admin hold or dependency: not demand the scheduler can serve now
    SUSPENDED = "suspended"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class ObservedNode:
    """A host as its orchestrator reports it. ``gpu_allocated_indices`` is filled where the source says
    which GPUs are busy (Slurm ``IDX:``); otherwise the first ``gpu_allocated`` GPUs are taken as busy."""

    name: str
    orchestrator: str
    gpu_total: int
    gpu_allocated: int = 0
    gpu_model: str = ""
    nvlink_domain: str = ""
    leaf_switch: str = ""
    spine: str = ""
    state: str = ""
    state_flags: tuple[str, ...] = ()
    reason: str = ""
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    taints: tuple[Taint, ...] = ()
    cordoned: bool = False
    partitions: tuple[str, ...] = ()
    schedulable: bool = True
    gpu_allocated_indices: tuple[int, ...] = ()
    cpu_total: int = 0
    address: str = ""
    condition: NodeCondition | None = None  # set by the collectors; None on hand-built nodes (tests, traces)

    @property
    def gpu_free(self) -> int:
        return max(self.gpu_total - self.gpu_allocated, 0)

    def gpu_free_milli(self) -> tuple[int, ...]:
        busy = set(self.gpu_allocated_indices) or set(range(self.gpu_allocated))
        return tuple(0 if i in busy else MILLI_PER_GPU for i in range(self.gpu_total))

    def to_node(self) -> Node:
        return Node(
            name=self.name,
            gpu_total=self.gpu_total,
            gpu_model=self.gpu_model,
            gpu_free_milli=self.gpu_free_milli(),
            cpu_milli_total=self.cpu_total * 1000,
            nvlink_domain=self.nvlink_domain,
            leaf_switch=self.leaf_switch,
            spine=self.spine,
            orchestrator=self.orchestrator,
            schedulable=self.schedulable and not self.cordoned,
        )


@dataclass(frozen=True, slots=True)
class AdmissionGap:
    """A pod of a workload that carries no decision of the portal's admission webhook although it was created
    after the webhook was registered: the API server created it without the webhook's answer (webhook down or
    timed out under ``failurePolicy: Ignore``, or a selector that left it out)."""

    namespace: str
    pod: str
    uid: str
    created_at: float | None


@dataclass(frozen=True, slots=True)
class ObservedWorkload:
    """One unit of demand. ``instances`` identical copies (pending Slurm array tasks, Ray demand
    shapes) each of ``gang_size`` members x ``gpus_per_member`` GPUs (a float: Ray allows 0.5 GPU).

    ``node_gpu_indices``, when the source says which GPUs a running workload holds (Slurm), has one
    entry per entry of ``nodes``: the GPU indices on that node. Empty when the source does not say."""

    external_id: str
    orchestrator: str
    team: str
    state: WorkloadState
    gang_size: int = 1
    gpus_per_member: float = 0.0
    instances: int = 1
    user: str = ""
    name: str = ""
    kind: WorkloadKind = WorkloadKind.BATCH
    priority: int = 0
    submitted_at: float | None = None
    started_at: float | None = None
    nodes: tuple[str, ...] = ()
    pending_reason: str = ""
    array_id: str = ""
    queue: str = ""
    node_gpu_indices: tuple[tuple[int, ...], ...] = ()
    # Every name the source gives the submitter, most specific first (engine/owners.py maps them to a
    # portal user at ingest); ``user`` is the first of them, as the orchestrator shows it.
    claims: tuple[Claim, ...] = ()
    scheduler: str = ""  # the scheduler its pods asked for (Kubernetes ``spec.schedulerName``)
    admission_gaps: tuple[AdmissionGap, ...] = ()
    # The job the orchestrator stops this workload by, when that is not the workload itself: a Ray placement
    # group, task or actor names its job's submission id (the Jobs API's stop; "" for a driver started by hand).
    submission_id: str = ""

    @property
    def gpus(self) -> float:
        return self.instances * self.gang_size * self.gpus_per_member

    def to_request(self) -> Request:
        whole = float(self.gpus_per_member).is_integer()
        return Request(
            id=f"{self.orchestrator}:{self.external_id}",
            members=self.gang_size * self.instances,
            gpus_per_member=int(self.gpus_per_member) if whole else 0,
            gpu_milli=0 if whole else round(self.gpus_per_member * MILLI_PER_GPU),
            team=self.team,
            priority=self.priority,
            kind=self.kind,
            submitted_at=self.submitted_at or 0.0,
            orchestrator=self.orchestrator,
        )

    def to_running(self) -> RunningWorkload:
        return RunningWorkload(
            id=f"{self.orchestrator}:{self.external_id}",
            team=self.team,
            gpus=self.gpus,
            priority=self.priority,
            started_at=self.started_at or 0.0,
            gang_id=self.external_id if self.gang_size > 1 else "",
            kind=self.kind,
        )


@dataclass(frozen=True, slots=True)
class ObservedQueue:
    """A Volcano Queue or a Slurm partition: where demand waits and what bounds it.
    ``None`` GPU bounds mean "not set"."""

    name: str
    orchestrator: str
    kind: str  # "volcano_queue" | "slurm_partition"
    state: str = ""
    weight: float = 0.0
    guaranteed_gpus: int | None = None
    capability_gpus: int | None = None
    reclaimable: bool | None = None
    priority_tier: int = 0
    nodes: tuple[str, ...] = ()
    gpu_total: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one round saw from one orchestrator. ``pending_gpus`` is the GPU demand the
    orchestrator itself reports as waiting (held work excluded); ``errors`` are non-fatal notes
    (a fatal problem raises instead)."""

    orchestrator_name: str
    kind: OrchestratorKind
    taken_at: datetime
    nodes: tuple[ObservedNode, ...]
    workloads: tuple[ObservedWorkload, ...]
    queues: tuple[ObservedQueue, ...] = ()
    pending_gpus: float = 0.0
    errors: tuple[str, ...] = ()

    @property
    def gpu_total(self) -> int:
        return sum(n.gpu_total for n in self.nodes)

    @property
    def gpu_allocated(self) -> int:
        return sum(n.gpu_allocated for n in self.nodes)

    def node(self, name: str) -> ObservedNode:
        return next(n for n in self.nodes if n.name == name)

    def engine_nodes(self) -> tuple[Node, ...]:
        return tuple(n.to_node() for n in self.nodes)

    def pending_requests(self) -> tuple[Request, ...]:
        return tuple(w.to_request() for w in self.workloads if w.state is WorkloadState.PENDING)

    def running_workloads(self) -> tuple[RunningWorkload, ...]:
        return tuple(w.to_running() for w in self.workloads if w.state is WorkloadState.RUNNING)


@dataclass(frozen=True, slots=True)
class TeamMapping:
    """How each orchestrator's identity maps to a portal team.

    - Slurm: the job's ``account`` (``slurm_field="account"``) or ``user``; the other is the fallback.
    - Kubernetes: the pod label ``k8s_label`` when set and present, else the namespace.
    - Ray: the job submission ``metadata[ray_metadata_key]``, else the first group of
      ``ray_entrypoint_pattern`` in the entrypoint.
    ``aliases`` renames raw values (``{"llm-proj": "llm"}``); nothing found gives ``default_team``.
    ``namespace_teams``: Kubernetes namespaces that belong to a team (the governance mapping team -> namespaces,
    and namespaces labelled ``gpuportal.io/team``): a pod there is that team's, whatever its own labels say.
    """

    slurm_field: str = "account"
    k8s_label: str = ""
    k8s_user_label: str = "user"  # read after gpuportal.io/user
    ray_metadata_key: str = "team"
    ray_user_key: str = "owner"  # read after metadata user and submitter
    ray_entrypoint_pattern: str = r"--team[= ](\S+)"
    aliases: dict[str, str] = field(default_factory=dict, hash=False)
    default_team: str = "unassigned"
    namespace_teams: dict[str, str] = field(default_factory=dict, hash=False)

    def _resolve(self, *candidates: str | None) -> str:
        raw = next((c for c in candidates if c), "")
        return self.aliases.get(raw, raw) or self.default_team

    def slurm_team(self, account: str | None, user: str | None) -> str:
        if self.slurm_field == "user":
            return self._resolve(user, account)
        return self._resolve(account, user)

    def k8s_team(self, namespace: str, labels: dict[str, str] | None) -> str:
        if namespace in self.namespace_teams:
            return self.namespace_teams[namespace]
        label_value = (labels or {}).get(self.k8s_label) if self.k8s_label else None
        return self._resolve(label_value, namespace)

    def ray_team(self, metadata: dict[str, Any] | None, entrypoint: str | None) -> str:
        value = (metadata or {}).get(self.ray_metadata_key)
        if not value and entrypoint:
            match = re.search(self.ray_entrypoint_pattern, entrypoint)
            value = match.group(1) if match else None
        return self._resolve(str(value) if value else None)


@dataclass(frozen=True, slots=True)
class TopologyLabels:
    """Node labels that carry the topology path (Kubernetes labels, Ray node labels). The first
    present key wins; a node with no NVLink-domain label is its own domain (one DGX/HGX board)."""

    nvlink_domain: tuple[str, ...] = ("nvidia.com/gpu.clique", "topology/nvlink-domain")
    leaf_switch: tuple[str, ...] = ("network.topology.kubernetes.io/block", "topology/leaf-switch")
    spine: tuple[str, ...] = ("network.topology.kubernetes.io/spine", "topology/spine")
    gpu_model: tuple[str, ...] = ("nvidia.com/gpu.product",)

    @staticmethod
    def first(labels: dict[str, str], keys: tuple[str, ...]) -> str:
        return next((labels[k] for k in keys if labels.get(k)), "")


# Shared defaults (both frozen, so one instance is safe to share as a default argument).
DEFAULT_TEAMS = TeamMapping()
DEFAULT_LABELS = TopologyLabels()
