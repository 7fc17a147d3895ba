"""The native objects through which each orchestrator enforces governance (pure data, no I/O).

The engine computes them as *desired* state (:mod:`.governance_state`), the collectors read them back as
*observed* state and write them, so both sides speak these types and the diff compares like with like.
Each type has a ``kind`` (one per orchestrator object kind) and a ``key`` (its identity within that
kind); every other field is a managed setting that the diff compares.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import ClassVar

# The Kubernetes extended resource of NVIDIA's device plugin, and the quota key that caps its requests.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_QUOTA_KEY = f"requests.{GPU_RESOURCE}"
# Label that ties a namespace to its portal team (the mapping is editable: any namespace may carry it).
TEAM_LABEL = "gpuportal.io/team"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpuportal"
# Slurm's TRES name for GPUs (AccountingStorageTRES=gres/gpu).
GPU_TRES = "gres/gpu"


class _Native:
    """``key``: the object's identity within its kind, from the fields named in ``key_fields``."""

    __slots__ = ()
    key_fields: ClassVar[tuple[str, ...]] = ("name",)

    @property
    def key(self) -> str:
        return "/".join(str(getattr(self, f)) for f in self.key_fields)


class NativeKind(StrEnum):
    SLURM_ACCOUNT = "slurm_account"
    SLURM_USER = "slurm_user"
    K8S_NAMESPACE = "k8s_namespace"
    K8S_RESOURCE_QUOTA = "k8s_resource_quota"
    VOLCANO_QUEUE = "volcano_queue"
    KUEUE_CLUSTER_QUEUE = "kueue_cluster_queue"
    KUEUE_LOCAL_QUEUE = "kueue_local_queue"
    RAY_POOL_BOUNDS = "ray_pool_bounds"
    K8S_PRIORITY_CLASS = "k8s_priority_class"


@dataclass(frozen=True, slots=True)
class SlurmAccount(_Native):
    """A Slurm account association: ``Fairshare=`` from the team's weight, ``GrpTRES`` from its cap.
    ``grp_tres`` holds ``(tres, count)`` pairs sorted by name (``(("gres/gpu", 40),)``); empty = no cap."""

    kind: ClassVar[NativeKind] = NativeKind.SLURM_ACCOUNT
    name: str
    parent: str
    fairshare: int
    grp_tres: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SlurmUser(_Native):
    """A user association: ``user`` may submit with ``-A account``."""

    kind: ClassVar[NativeKind] = NativeKind.SLURM_USER
    key_fields: ClassVar[tuple[str, ...]] = ("account", "user")
    user: str
    account: str


@dataclass(frozen=True, slots=True)
class K8sNamespace(_Native):
    kind: ClassVar[NativeKind] = NativeKind.K8S_NAMESPACE
    name: str
    team: str  # the value of the gpuportal.io/team label


@dataclass(frozen=True, slots=True)
class K8sResourceQuota(_Native):
    """``spec.hard[requests.nvidia.com/gpu] = gpus`` in ``namespace``."""

    kind: ClassVar[NativeKind] = NativeKind.K8S_RESOURCE_QUOTA
    key_fields: ClassVar[tuple[str, ...]] = ("namespace", "name")
    namespace: str
    name: str
    gpus: int


@dataclass(frozen=True, slots=True)
class VolcanoQueue(_Native):
    """A Volcano ``Queue``: ``capability`` is the hard cap (None = uncapped), ``guarantee`` is reserved."""

    kind: ClassVar[NativeKind] = NativeKind.VOLCANO_QUEUE
    name: str
    weight: int
    guarantee_gpus: int
    capability_gpus: int | None
    reclaimable: bool


# Kueue's values of ``spec.preemption.reclaimWithinCohort``: Never (its default), LowerPriority, Any.
KUEUE_RECLAIM_NEVER = "Never"
KUEUE_RECLAIM_ANY = "Any"


@dataclass(frozen=True, slots=True)
class KueueClusterQueue(_Native):
    """One ``ClusterQueue`` per team in one cohort, one flavor per GPU model: ``nominalQuota`` = the
    guarantee, ``borrowingLimit`` = what it may borrow beyond it, ``lendingLimit`` = what it may lend;
    ``reclaim_within_cohort`` = ``spec.preemption.reclaimWithinCohort`` (``Any``: a workload that fits its
    queue's nominal quota evicts workloads other queues of the cohort run on borrowed quota). The cohort's
    lender queue (:func:`kueue_lender_name`) holds the pool's GPUs guaranteed to no team."""

    kind: ClassVar[NativeKind] = NativeKind.KUEUE_CLUSTER_QUEUE
    name: str
    cohort: str
    flavor: str
    nominal_gpus: int
    borrowing_limit_gpus: int | None
    lending_limit_gpus: int | None
    reclaim_within_cohort: str = KUEUE_RECLAIM_NEVER


def kueue_lender_name(cohort: str) -> str:
    """The ClusterQueue of a cohort that holds the GPUs no team is guaranteed, so teams can borrow them: a
    cohort lends only the quota its queues hold, and a GPU in no queue is in no cohort."""
    return f"{cohort}-unguaranteed"


@dataclass(frozen=True, slots=True)
class KueueLocalQueue(_Native):
    kind: ClassVar[NativeKind] = NativeKind.KUEUE_LOCAL_QUEUE
    key_fields: ClassVar[tuple[str, ...]] = ("namespace", "name")
    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True, slots=True)
class K8sPriorityClass(_Native):
    """A cluster-wide ``PriorityClass`` the admission webhook sets on routed pods (``priorityClassName``): without
    it the API server refuses every pod naming it, so governance creates and keeps it on each Kubernetes cluster."""

    kind: ClassVar[NativeKind] = NativeKind.K8S_PRIORITY_CLASS
    name: str
    value: int
    description: str


# The classes the webhook sets: serving work may preempt batch work, never the other way round.
PRIORITY_CLASSES = {
    "gpuportal-batch": (1000, "gpuportal: batch, training and HPO GPU work routed to Volcano"),
    "gpuportal-serving": (2000, "gpuportal: serving GPU work of the teams and kinds an admin entitled"),
}


@dataclass(frozen=True, slots=True)
class RayPoolBounds(_Native):
    """Ray has no per-team quota: the portal bounds the pool's GPUs (autoscaler min/max) only."""

    kind: ClassVar[NativeKind] = NativeKind.RAY_POOL_BOUNDS
    key_fields: ClassVar[tuple[str, ...]] = ("orchestrator",)
    orchestrator: str
    min_gpus: int
    max_gpus: int


NativeObject = (
    SlurmAccount
    | SlurmUser
    | K8sNamespace
    | K8sResourceQuota
    | VolcanoQueue
    | KueueClusterQueue
    | KueueLocalQueue
    | K8sPriorityClass
    | RayPoolBounds
)

# The fields that name an object rather than set it: never reported as a change.
IDENTITY_FIELDS = frozenset({"name", "user", "account", "namespace", "orchestrator"})


def settings(obj: NativeObject) -> dict[str, object]:
    """The managed settings of ``obj`` (every field but its identity), for diffs and audit records."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in IDENTITY_FIELDS}
