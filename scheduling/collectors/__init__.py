"""Collectors: read Slurm, Kubernetes (+Volcano) and Ray into engine-ready snapshots, and the few
actuators the portal may apply. Never imports Django (an import-linter contract enforces it)."""

from .actuators import ActionResult, KubernetesActuator, RayActuator, SlurmActuator
from .errors import CircuitOpen, CollectorError, MalformedResponse, SourceUnavailable
from .k8s import KubernetesCollector
from .ray import RayCollector
from .reliability import BreakerState, CircuitBreaker, RetryPolicy
from .slurm import SlurmCollector, TopologyPath, parse_topology
from .snapshot import (
    ObservedNode,
    ObservedQueue,
    ObservedWorkload,
    Snapshot,
    Taint,
    TeamMapping,
    TopologyLabels,
    WorkloadState,
)

__all__ = [
    "ActionResult",
    "BreakerState",
    "CircuitBreaker",
    "CircuitOpen",
    "CollectorError",
    "KubernetesActuator",
    "KubernetesCollector",
    "MalformedResponse",
    "ObservedNode",
    "ObservedQueue",
    "ObservedWorkload",
    "RayActuator",
    "RayCollector",
    "RetryPolicy",
    "SlurmActuator",
    "SlurmCollector",
    "Snapshot",
    "SourceUnavailable",
    "Taint",
    "TeamMapping",
    "TopologyLabels",
    "TopologyPath",
    "WorkloadState",
    "parse_topology",
]
