"""Governance writes the split, not copies (#31 item 2): desired native state from the entitlement split."""

from __future__ import annotations

from hypothesis import given, settings

from scheduling.engine.entitlement_split import Demand, Supply, split_entitlements
from scheduling.engine.governance_state import (
    GovernanceInput,
    GovGrant,
    GovOrchestrator,
    GovQueue,
    GovTeam,
    desired_state,
)
from scheduling.engine.governance_types import K8sResourceQuota, KueueClusterQueue, SlurmAccount, VolcanoQueue
from scheduling.engine.types import OrchestratorKind

from .test_entitlement_split_properties import AT, Case, fleets

SLURM22 = GovOrchestrator("slurm22", OrchestratorKind.SLURM, pool_gpus=64)
SLURM24 = GovOrchestrator("slurm24", OrchestratorKind.SLURM, pool_gpus=32)
K8S = GovOrchestrator(
    "k8s", OrchestratorKind.KUBERNETES, pool_gpus=48, kueue=True, namespace_demand={"nlp-train": (6, 2)}
)
RAY = GovOrchestrator("ray", OrchestratorKind.RAY, pool_gpus=24)
ORCHS = (SLURM22, SLURM24, K8S, RAY)
TEAMS = (
    GovTeam("research"),
    GovTeam("nlp", "research", namespaces=("nlp-train", "nlp-serve")),
    GovTeam("production"),
)
QUEUES = (GovQueue("research", 40, 40, 96), GovQueue("nlp", 60, 4, 8), GovQueue("production", 60, 60, 120))
GRANTS = (
    GovGrant("nlp", 4, 0, 10_000),
    GovGrant("nlp", 4, 0, 10_000, orchestrator="k8s"),
    GovGrant("nlp", 4, 0, 10_000, orchestrator="slurm24"),
)


def supply_of(orchs):
    return [Supply(o.name, o.kind, o.gpu_model, o.pool_gpus) for o in orchs]


def caps_written(states, team):
    """Per orchestrator, the team's cap as written: GrpTRES on Slurm, the sum of its namespaces' quotas."""
    caps = {}
    for name, state in states.items():
        for obj in state.objects:
            if isinstance(obj, SlurmAccount) and obj.name == team and obj.grp_tres:
                caps[name] = obj.grp_tres[0][1]
            if isinstance(obj, K8sResourceQuota) and obj.namespace.startswith(team):
                caps[name] = caps.get(name, 0) + obj.gpus
    return caps


def test_nlps_caps_written_over_all_clusters_add_up_to_at_most_its_fleet_cap():
    data = GovernanceInput(TEAMS, QUEUES, GRANTS)
    split = split_entitlements(data, AT, supply_of(ORCHS), [Demand("nlp", "slurm22", "", 10, 6)])
    states = desired_state(data, ORCHS, AT, split)
    caps = caps_written(states, "nlp")
    assert set(caps) == {"slurm22", "slurm24", "k8s"}
    assert sum(caps.values()) + split.share("nlp", "ray", "").cap <= 20  # burst 8 + grants 4 + 4 + 4
    copied = caps_written(desired_state(data, ORCHS, AT), "nlp")  # what the copies wrote
    assert copied == {"slurm22": 12, "slurm24": 16, "k8s": 32}  # 16 per namespace, twice


def test_a_teams_namespace_quotas_sum_to_its_share_where_its_pods_run_first():
    data = GovernanceInput(TEAMS, QUEUES, GRANTS)
    split = split_entitlements(data, AT, supply_of(ORCHS), [Demand("nlp", "k8s", "", 6, 2)])
    quotas = {
        o.namespace: o.gpus
        for o in desired_state(data, ORCHS, AT, split)["k8s"].objects
        if isinstance(o, K8sResourceQuota)
    }
    share = split.share("nlp", "k8s", "").cap
    assert quotas["nlp-train"] + quotas["nlp-serve"] == share
    assert quotas["nlp-train"] >= 8  # 6 running + 2 pending there


def test_volcano_and_kueue_guarantees_written_on_one_cluster_fit_its_pool():
    # research guaranteed 40 and production 60 on a 48-GPU cluster: copied, 40 + 4 + 60 = 104 of 48.
    data = GovernanceInput(TEAMS, QUEUES, GRANTS)
    split = split_entitlements(data, AT, supply_of(ORCHS), [Demand("production", "k8s", "", 30, 0)])
    objects = desired_state(data, ORCHS, AT, split)["k8s"].objects
    volcano = {o.name: o for o in objects if isinstance(o, VolcanoQueue)}
    kueue = {o.name: o for o in objects if isinstance(o, KueueClusterQueue)}
    assert sum(q.guarantee_gpus for q in volcano.values()) <= 48
    assert sum(q.nominal_gpus for q in kueue.values()) <= 48
    for q in volcano.values():
        assert q.capability_gpus is None or q.guarantee_gpus <= q.capability_gpus
    copied = desired_state(data, ORCHS, AT)["k8s"].objects
    assert sum(o.guarantee_gpus for o in copied if isinstance(o, VolcanoQueue)) > 48  # today's 64 of 48, in kind


@settings(max_examples=100, deadline=None)
@given(fleets())
def test_on_every_cluster_the_written_guarantees_fit_and_caps_never_exceed_the_split(case: Case) -> None:
    orchs = [
        GovOrchestrator(
            s.orchestrator,
            OrchestratorKind.KUBERNETES if s.kind is not OrchestratorKind.SLURM else s.kind,
            pool_gpus=s.gpus,
            kueue=True,
        )
        for s in case.supply
    ]
    supply = [Supply(o.name, o.kind, "", o.pool_gpus) for o in orchs]
    split = split_entitlements(case.data, AT, supply, case.demand)
    states = desired_state(case.data, orchs, AT, split)
    for orch in orchs:
        objects = states[orch.name].objects
        guarantees = [o.guarantee_gpus for o in objects if isinstance(o, VolcanoQueue)]
        assert sum(guarantees) <= orch.pool_gpus
        assert sum(o.nominal_gpus for o in objects if isinstance(o, KueueClusterQueue)) <= orch.pool_gpus
        for team in case.data.teams:
            share = split.share(team.slug, orch.name, "")
            for obj in objects:
                if isinstance(obj, SlurmAccount) and obj.name == team.slug:
                    assert obj.grp_tres == (("gres/gpu", share.cap),)
                if isinstance(obj, K8sResourceQuota) and obj.namespace == team.slug:
                    assert obj.gpus == share.cap
