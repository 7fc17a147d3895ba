from .fleet import CollectorRun, Node, Orchestrator, Workload, WorkloadUtilisation
from .ledger import FleetHost, LedgerFinding, LedgerRound, NodeAlias, OwnershipInterval, SourceView
from .metrics import UsageRollup, UsageSample
from .pools import NodeMove, PoolPolicy, RebalancePlan
from .quota import CapacityLock, QuotaGrant, QuotaRequest
from .teams import Membership, Queue, Team

__all__ = [
    "CapacityLock",
    "CollectorRun",
    "FleetHost",
    "LedgerFinding",
    "LedgerRound",
    "Membership",
    "Node",
    "NodeAlias",
    "NodeMove",
    "Orchestrator",
    "OwnershipInterval",
    "PoolPolicy",
    "Queue",
    "QuotaGrant",
    "QuotaRequest",
    "RebalancePlan",
    "SourceView",
    "Team",
    "UsageRollup",
    "UsageSample",
    "Workload",
    "WorkloadUtilisation",
]
