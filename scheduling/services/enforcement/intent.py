"""Governance intent: what each governed cluster should hold, from the ORM (the team tree with members, queues,
grants not yet over, pool bounds) and each orchestrator's options (docs/governance.md, "Inputs"). Reads only: the
round (``rounds.py``) turns it into desired native objects and diffs them against what the cluster holds.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from scheduling.engine.governance_state import (
    GovernanceInput,
    GovernanceInputError,
    GovOrchestrator,
    GovTeam,
    InputProblem,
)
from scheduling.engine.governance_types import (
    K8sNamespace,
    K8sResourceQuota,
    KueueClusterQueue,
    KueueLocalQueue,
    NativeObject,
    SlurmAccount,
    SlurmUser,
    VolcanoQueue,
    kueue_lender_name,
)
from scheduling.engine.owners import NameKind
from scheduling.engine.types import OrchestratorKind
from scheduling.models import Membership, Orchestrator, Team
from scheduling.selectors import entitlements as entitlement_reads
from scheduling.selectors.pool_policies import bounds_now

from .. import entitlement_split, identity
from .. import orchestrators as orchestrator_access
from ..reclaim import reclaim_settings

AUTO, REVIEW = "auto", "review"


def governance_input(at: datetime) -> GovernanceInput:
    """The portal's intent at ``at``: the team tree with members, queues, grants not yet over, pool bounds."""
    members: dict[int, list[str]] = {}
    for team_id, username in Membership.objects.values_list("team_id", "user__username").order_by("user__username"):
        members.setdefault(team_id, []).append(username)
    slugs = dict(Team.objects.values_list("pk", "slug"))
    teams = tuple(
        GovTeam(slug, slugs.get(parent_id) if parent_id else None, tuple(members.get(pk, ())))
        for pk, slug, parent_id in Team.objects.values_list("pk", "slug", "parent_id").order_by("slug")
    )
    # The same queues and grants every other reader of entitlements sees (selectors/entitlements.py).
    return GovernanceInput(teams, entitlement_reads.queues(slugs), entitlement_reads.grants(slugs, at), bounds_now(at))


def governed_orchestrators() -> list[Orchestrator]:
    """The real (not demo), enabled Slurm, Kubernetes and Ray orchestrators."""
    return list(Orchestrator.objects.governed().order_by("name"))


def mode_of(orchestrator: Orchestrator) -> str:
    return orchestrator_access.governance_options(orchestrator).get("mode", REVIEW)


def gov_orchestrator(orchestrator: Orchestrator, *, kueue: bool = False) -> GovOrchestrator:
    """How governance maps onto ``orchestrator``, from its options (docs/governance.md, "Inputs")."""
    options = orchestrator_access.governance_options(orchestrator)
    pool_gpus = sum(orchestrator.nodes.values_list("gpu_total", flat=True))
    return GovOrchestrator(
        name=orchestrator.name,
        kind=OrchestratorKind(orchestrator.kind),
        gpu_model=options.get("gpu_model", ""),
        slurm_root_account=options.get("root_account", "root"),
        slurm_typed_gres=bool(options.get("typed_gres", False)),
        user_overrides=identity.owner_map(()).cluster_names(NameKind.SLURM_USER, orchestrator.name),
        volcano=bool(options.get("volcano", True)),
        kueue=kueue,
        kueue_cohort=options.get("kueue_cohort", "gpuportal"),
        kueue_flavor=options.get("kueue_flavor", "default-flavor"),
        kueue_reclaim=reclaim_settings(orchestrator).mode == "native",
        pool_gpus=pool_gpus,
        namespace_demand=entitlement_split.namespace_demand(orchestrator) if kind_k8s(orchestrator) else {},
    )


def kind_k8s(orchestrator: Orchestrator) -> bool:
    return orchestrator.kind == Orchestrator.Kind.KUBERNETES


def with_namespaces(data: GovernanceInput, orchestrator: Orchestrator) -> GovernanceInput:
    """``data`` with this Kubernetes orchestrator's namespace mapping (team -> namespaces) applied."""
    mapping = orchestrator_access.governance_options(orchestrator).get("namespaces") or {}
    if not mapping:
        return data
    slugs = {t.slug for t in data.teams}
    unknown = sorted(set(mapping) - slugs)
    if unknown:
        raise GovernanceInputError(
            [
                InputProblem("options.governance.namespaces", f"{orchestrator.name}: {name!r} is not a team")
                for name in unknown
            ]
        )
    teams = tuple(dataclasses.replace(t, namespaces=tuple(mapping.get(t.slug, ()))) for t in data.teams)
    return dataclasses.replace(data, teams=teams)


def team_of(obj: NativeObject | None, namespace_teams: dict[str, str]) -> str:
    """The team slug an object enforces ("" for a pool-wide one such as Ray's bounds or the root account)."""
    if isinstance(obj, KueueClusterQueue) and obj.name == kueue_lender_name(obj.cohort):
        return ""  # the pool's unguaranteed GPUs: no team's
    if isinstance(obj, SlurmAccount | VolcanoQueue | KueueClusterQueue):
        return obj.name
    if isinstance(obj, SlurmUser):
        return obj.account
    if isinstance(obj, K8sNamespace):
        return obj.team
    if isinstance(obj, K8sResourceQuota):
        return namespace_teams.get(obj.namespace, "")
    if isinstance(obj, KueueLocalQueue):
        return obj.cluster_queue
    return ""
