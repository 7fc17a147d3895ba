from .accounting import AccountingSource
from .admission import AdmissionDecision
from .changes import TableChange
from .enforcement import (
    AppliedObject,
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    EntitlementShare,
)
from .expander import ExpanderDecision
from .fleet import CollectorRun, Node, Orchestrator, Workload, WorkloadUtilisation, node_key, split_node_key
from .fragmentation import FragmentationSample
from .idempotency import IdempotencyKey
from .ledger import FleetHost, LedgerFinding, LedgerRound, NodeAlias, OwnershipInterval, SourceView
from .metrics import UsageRollup, UsageSample
from .notifications import ChatWebhook, JobAction, Notification
from .operations import RoundLease, TaskStat
from .owners import IdentityOverride
from .planning import WhatIfScenario
from .pools import NodeMove, PoolPolicy, RebalancePlan
from .quota import CapacityLock, QuotaGrant, QuotaRequest
from .reclaim import ReclaimPlan
from .reports import CapacityReport, ReportSubscription
from .retention import HistoryRetention
from .teams import ExternalIdentity, GroupMapping, Membership, Queue, Team, TeamTree

__all__ = [
    "AccountingSource",
    "AdmissionDecision",
    "AppliedObject",
    "CapacityLock",
    "CapacityReport",
    "ChatWebhook",
    "CollectorRun",
    "DriftFinding",
    "EnforcementOutcome",
    "EnforcementPlan",
    "EnforcementRun",
    "EntitlementShare",
    "ExpanderDecision",
    "ExternalIdentity",
    "FleetHost",
    "FragmentationSample",
    "GroupMapping",
    "HistoryRetention",
    "IdempotencyKey",
    "IdentityOverride",
    "JobAction",
    "LedgerFinding",
    "LedgerRound",
    "Membership",
    "Node",
    "NodeAlias",
    "NodeMove",
    "Notification",
    "Orchestrator",
    "OwnershipInterval",
    "PoolPolicy",
    "Queue",
    "QuotaGrant",
    "QuotaRequest",
    "RebalancePlan",
    "ReclaimPlan",
    "ReportSubscription",
    "RoundLease",
    "SourceView",
    "TableChange",
    "TaskStat",
    "Team",
    "TeamTree",
    "UsageRollup",
    "UsageSample",
    "WhatIfScenario",
    "Workload",
    "WorkloadUtilisation",
    "node_key",
    "split_node_key",
]
