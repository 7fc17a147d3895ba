"""The entitlement split on the issue's own cases (#31): nlp's caps, research's guarantee, the daily move."""

from __future__ import annotations

from scheduling.engine.entitlement_split import (
    RAY_OBSERVED,
    Demand,
    Split,
    Supply,
    split_entitlements,
)
from scheduling.engine.governance_state import GovernanceInput, GovGrant, GovQueue, GovTeam
from scheduling.engine.types import OrchestratorKind

AT = 100.0


def guarantee_and_cap(split: Split, team: str, orchestrator: str, gpu_model: str) -> tuple[int, int | None]:
    """(guarantee, cap) of ``team`` on (orchestrator, model); (0, None) where it has no share there."""
    share = split.share(team, orchestrator, gpu_model)
    return (0, None) if share is None else (share.guarantee, share.cap)
SLURM22 = Supply("slurm22", OrchestratorKind.SLURM, "", 64)
SLURM24 = Supply("slurm24", OrchestratorKind.SLURM, "", 32)
K8S = Supply("k8s", OrchestratorKind.KUBERNETES, "", 48)
RAY = Supply("ray", OrchestratorKind.RAY, "", 24)
FLEET = (SLURM22, SLURM24, K8S, RAY)
TEAMS = (GovTeam("research"), GovTeam("nlp", "research"), GovTeam("production"))
QUEUES = (
    GovQueue("research", 40, 40, 96),
    GovQueue("nlp", 60, 4, 8),
    GovQueue("production", 60, 60, 120),
)
NLP_GRANTS = (
    GovGrant("nlp", 4, 0, 1_000),
    GovGrant("nlp", 4, 0, 1_000, orchestrator="k8s"),
    GovGrant("nlp", 4, 0, 1_000, orchestrator="slurm24"),
)


def caps(split, team):
    return {s.orchestrator: s.cap for s in split.of_team(team)}


def test_nlps_caps_over_the_clusters_add_up_to_its_burst_limit_and_grants_not_three_copies():
    # Copied whole (today): 12 / 16 / 16 on three clusters for a burst limit of 8 and grants of 4 + 4 + 4.
    data = GovernanceInput(TEAMS, QUEUES, NLP_GRANTS)
    demand = [Demand("nlp", "slurm22", "", 10, 6)]
    split = split_entitlements(data, AT, FLEET, demand)
    nlp = caps(split, "nlp")
    assert split.fleet["nlp"].cap == 20
    assert sum(nlp.values()) == 20
    assert nlp["slurm24"] == 4 and nlp["k8s"] == 4  # a grant naming an orchestrator lands there only
    assert nlp["slurm22"] == 12  # what runs (10) and as much of its pending as the rest of the cap allows


def test_a_guarantee_of_40_is_not_written_whole_on_a_48_gpu_cluster_beside_the_others():
    data = GovernanceInput(TEAMS, QUEUES)
    split = split_entitlements(data, AT, (K8S, SLURM22), [Demand("production", "k8s", "", 30, 10)])
    on_k8s = [s for s in split.shares if s.orchestrator == "k8s" and s.team in ("research", "production")]
    assert sum(s.guarantee for s in on_k8s) <= 48
    assert split.share("production", "k8s", "").guarantee >= 40  # where its work is (30 running + 10 pending)
    for team in ("research", "production"):
        assert sum(s.guarantee for s in split.of_team(team)) == split.fleet[team].guarantee


def test_the_split_follows_slurm_at_nine_and_ray_overnight_within_one_round():
    data = GovernanceInput((GovTeam("nlp"),), (GovQueue("nlp", 100, 16, 64),))
    night = split_entitlements(data, AT, FLEET, [Demand("nlp", "ray", "", 24, 0), Demand("nlp", "slurm22", "", 0, 0)])
    assert night.share("nlp", "ray", "").cap >= 24
    morning = [Demand("nlp", "ray", "", 0, 0), Demand("nlp", "slurm22", "", 8, 48)]
    nine = split_entitlements(data, AT, FLEET, morning, night)
    assert nine.share("nlp", "slurm22", "").cap >= 56  # 8 running + 48 pending, one round later
    assert guarantee_and_cap(nine, "nlp", "slurm22", "")[0] == 16
    assert sum(s.cap for s in nine.of_team("nlp")) <= 64


def test_ray_shares_count_against_the_fleet_cap_and_say_they_are_observed_only():
    data = GovernanceInput((GovTeam("nlp"),), (GovQueue("nlp", 100, 0, 8),))
    split = split_entitlements(data, AT, FLEET, [Demand("nlp", "ray", "", 6, 0), Demand("nlp", "k8s", "", 0, 8)])
    ray = split.share("nlp", "ray", "")
    assert ray.cap == 6 and not ray.enforced and RAY_OBSERVED in ray.reasons
    assert split.share("nlp", "k8s", "").cap == 2  # what Ray leaves of the fleet cap of 8


def test_running_beyond_the_cap_holds_the_cap_there_and_says_reclaim_takes_it_back():
    data = GovernanceInput((GovTeam("nlp"),), (GovQueue("nlp", 100, 0, 8),))
    split = split_entitlements(data, AT, FLEET, [Demand("nlp", "slurm22", "", 28, 0)])
    share = split.share("nlp", "slurm22", "")
    assert (share.cap, share.over) == (28, 20)
    assert any("reclaim" in r for r in share.reasons)
    assert all(s.cap == 0 for s in split.of_team("nlp") if s.orchestrator != "slurm22")


def test_a_model_queue_covers_its_model_and_the_any_model_queue_the_rest():
    fleet = (Supply("a", OrchestratorKind.SLURM, "H100", 32), Supply("b", OrchestratorKind.SLURM, "A100", 32))
    data = GovernanceInput((GovTeam("nlp"),), (GovQueue("nlp", 100, 0, 8, "H100"), GovQueue("nlp", 100, 0, 4)))
    split = split_entitlements(data, AT, fleet, [])
    assert guarantee_and_cap(split, "nlp", "a", "H100") == (0, 8)
    assert guarantee_and_cap(split, "nlp", "b", "A100") == (0, 4)
    assert guarantee_and_cap(split, "nlp", "c", "") == (0, None)


def test_a_team_without_a_queue_for_the_model_has_no_cap_of_its_own():
    fleet = (Supply("a", OrchestratorKind.SLURM, "H100", 32),)
    data = GovernanceInput((GovTeam("r"), GovTeam("nlp", "r")), (GovQueue("r", 100, 8, 16),))
    split = split_entitlements(data, AT, fleet, [Demand("nlp", "a", "H100", 4, 0)])
    assert split.share("nlp", "a", "H100").cap is None
    assert split.share("r", "a", "H100").cap == 16
