from .fleet import CollectorRun, Node, Orchestrator, Workload, WorkloadUtilisation
from .fragmentation import FragmentationSample
from .metrics import UsageRollup, UsageSample
from .pools import NodeMove, PoolPolicy, RebalancePlan
from .quota import CapacityLock, QuotaGrant, QuotaRequest
from .teams import Membership, Queue, Team

__all__ = [
    "CapacityLock",
    "CollectorRun",
    "FragmentationSample",
    "Membership",
    "Node",
    "NodeMove",
    "Orchestrator",
    "PoolPolicy",
    "Queue",
    "QuotaGrant",
    "QuotaRequest",
    "RebalancePlan",
    "Team",
    "UsageRollup",
    "UsageSample",
    "Workload",
    "WorkloadUtilisation",
]
