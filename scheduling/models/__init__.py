from .fleet import CollectorRun, Node, Orchestrator, Workload, WorkloadUtilisation
from .fragmentation import FragmentationSample
from .metrics import UsageRollup, UsageSample
from .planning import WhatIfScenario
from .pools import NodeMove, PoolPolicy, RebalancePlan
from .quota import CapacityLock, QuotaGrant, QuotaRequest
from .reports import CapacityReport, ReportSubscription
from .teams import Membership, Queue, Team

__all__ = [
    "CapacityLock",
    "CapacityReport",
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
    "ReportSubscription",
    "Team",
    "UsageRollup",
    "UsageSample",
    "WhatIfScenario",
    "Workload",
    "WorkloadUtilisation",
]
