"""One orchestrator's governance objects behind one interface: read them back, apply changes (idempotent, never
raising). Slurm through the accounting writer (sacctmgr), Kubernetes through the governance client (namespaces,
ResourceQuotas, PriorityClasses, Volcano Queues, Kueue queues). Plain arguments, no Django: the governance round
(``services/enforcement/rounds.py``) builds them from an orchestrator's options and credentials.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.collectors.governance_apply import ApplyResult, apply_kubernetes, apply_slurm
from scheduling.collectors.k8s_governance import KubernetesGovernance
from scheduling.collectors.slurm_accounting import SlurmAccountingWriter
from scheduling.engine.governance_state import Change, DesiredState, GovernanceInputError, InputProblem
from scheduling.engine.governance_types import NativeObject


class Cluster(Protocol):
    """One orchestrator's governance objects: read them back, apply changes (idempotent, never raising)."""

    kueue: bool

    def read(self, desired: DesiredState) -> list[NativeObject]: ...

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]: ...


@dataclass
class SlurmCluster:
    writer: SlurmAccountingWriter
    kueue: bool = False

    def read(self, desired: DesiredState) -> list[NativeObject]:
        accounts, users = self.writer.read()
        return [*accounts, *users]

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]:
        return apply_slurm(changes, self.writer)


@dataclass
class KubernetesCluster:
    gov: KubernetesGovernance
    volcano: bool
    kueue: bool = False
    mapped: dict[str, list[str]] = field(default_factory=dict)  # options.governance.namespaces

    def read(self, desired: DesiredState) -> list[NativeObject]:
        missing_namespaces(self.mapped, self.gov.namespace_names())
        found: list[NativeObject] = [
            *self.gov.read_namespaces(), *self.gov.read_quotas(), *self.gov.read_priority_classes()
        ]
        if self.volcano:
            found += self.gov.read_volcano_queues()
        if self.kueue:
            found += [*self.gov.read_kueue_cluster_queues(), *self.gov.read_kueue_local_queues()]
        return found

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]:
        return apply_kubernetes(changes, self.gov)


def missing_namespaces(mapped: dict[str, list[str]], existing: set[str]) -> None:
    """An explicit mapping names namespaces where the team's workloads run: one missing from the cluster is
    almost surely a typo, and making it would cap an empty namespace while the real one stays uncapped. So the
    orchestrator's round stops there, before any write (docs/governance.md, "Namespaces: made or refused")."""
    problems = [
        InputProblem(f"options.governance.namespaces.{team}", f"namespace {name!r} does not exist on the cluster")
        for team, names in sorted(mapped.items())
        for name in names
        if name not in existing
    ]
    if problems:
        raise GovernanceInputError(problems)
