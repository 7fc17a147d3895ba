"""Desired native state of governance and its diff: pure, no database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.calendar import Bounds
from scheduling.engine.governance_state import (
    RAY_POOL_ONLY,
    Action,
    GovernanceInput,
    GovernanceInputError,
    GovGrant,
    GovOrchestrator,
    GovQueue,
    GovTeam,
    desired_state,
    diff,
    object_id,
    team_name_problems,
)
from scheduling.engine.governance_types import (
    K8sNamespace,
    K8sResourceQuota,
    KueueClusterQueue,
    RayPoolBounds,
    SlurmAccount,
    SlurmUser,
    VolcanoQueue,
    kueue_lender_name,
)
from scheduling.engine.types import OrchestratorKind

SLURM = GovOrchestrator("hpc", OrchestratorKind.SLURM, slurm_root_account="portal", user_overrides={"alice": "root"})
K8S = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES)
RAY = GovOrchestrator("sweeps", OrchestratorKind.RAY, pool_gpus=64)
TEAMS = (
    GovTeam("research", None, ("alice", "lead")),
    GovTeam("nlp", "research", ("alice",)),
    GovTeam("production", None, ("bob",), ("prod", "serving")),
)
QUEUES = (GovQueue("research", 40, 8, 24), GovQueue("nlp", 50, 4, 16), GovQueue("production", 60, 16, 32))
HOUR = 3600.0


def state(orch=SLURM, grants=(), at=HOUR, teams=TEAMS, queues=QUEUES, bounds=None):
    data = GovernanceInput(teams, queues, tuple(grants), bounds or {})
    return desired_state(data, [orch], at)[orch.name]


def objects(orch=SLURM, **kwargs):
    return {object_id(o): o for o in state(orch, **kwargs).objects}


def test_weights_become_fairshare_in_hundredths_of_a_percent_under_the_parent_account():
    got = objects()
    assert got["slurm_account:portal"] == SlurmAccount("portal", "root", 1)
    assert got["slurm_account:research"] == SlurmAccount("research", "portal", 4000, (("gres/gpu", 24),))
    assert got["slurm_account:production"].fairshare == 6000
    assert got["slurm_account:nlp"].parent == "research"


def test_teams_hang_straight_under_root_when_no_account_of_the_portals_own_is_asked_for():
    got = objects(GovOrchestrator("hpc", OrchestratorKind.SLURM))
    assert "slurm_account:root" not in got and got["slurm_account:research"].parent == "root"


def test_the_cap_is_the_burst_limit_plus_grants_active_at_that_moment():
    grant = GovGrant("production", 32, starts_at=2 * HOUR, ends_at=5 * HOUR)
    caps = [objects(grants=[grant], at=t)["slurm_account:production"].grp_tres for t in (HOUR, 2 * HOUR, 5 * HOUR)]
    assert caps == [(("gres/gpu", 32),), (("gres/gpu", 64),), (("gres/gpu", 32),)]


def test_a_revoked_grant_adds_nothing():
    grant = GovGrant("production", 32, starts_at=0, ends_at=5 * HOUR, revoked=True)
    assert objects(grants=[grant])["slurm_account:production"].grp_tres == (("gres/gpu", 32),)


def test_a_grant_to_a_child_raises_every_slurm_ancestors_cap_so_it_can_take_effect():
    got = objects(grants=[GovGrant("nlp", 32, 0, 5 * HOUR)])
    assert got["slurm_account:nlp"].grp_tres == (("gres/gpu", 48),)
    assert got["slurm_account:research"].grp_tres == (("gres/gpu", 56),)


def test_a_grant_for_another_orchestrator_or_gpu_model_adds_nothing_here():
    elsewhere = GovGrant("production", 8, 0, 5 * HOUR, orchestrator="k8s")
    other_model = GovGrant("production", 8, 0, 5 * HOUR, gpu_model="a100")
    h100 = GovOrchestrator("hpc", OrchestratorKind.SLURM, gpu_model="h100")
    assert objects(grants=[elsewhere, other_model])["slurm_account:production"].grp_tres == (("gres/gpu", 32),)
    assert objects(h100, grants=[other_model])["slurm_account:production"].grp_tres == (("gres/gpu", 32),)


def test_a_model_specific_queue_wins_over_the_any_model_queue():
    queues = (*QUEUES, GovQueue("production", 70, 2, 4, gpu_model="h100"))
    h100 = GovOrchestrator("hpc", OrchestratorKind.SLURM, gpu_model="h100", slurm_typed_gres=True)
    got = objects(h100, queues=queues)["slurm_account:production"]
    assert (got.fairshare, got.grp_tres) == (7000, (("gres/gpu:h100", 4),))


def test_members_become_users_of_their_accounts_with_the_identity_override_applied():
    users = {o for o in state().objects if isinstance(o, SlurmUser)}
    assert users == {
        SlurmUser("root", "research"),
        SlurmUser("lead", "research"),
        SlurmUser("root", "nlp"),
        SlurmUser("bob", "production"),
    }


def test_every_mapped_namespace_is_labelled_with_its_team_and_capped_by_a_quota():
    got = objects(K8S)
    assert got["k8s_namespace:serving"] == K8sNamespace("serving", "production")
    assert got["k8s_resource_quota:prod/gpuportal-gpu"] == K8sResourceQuota("prod", "gpuportal-gpu", 32)
    assert "k8s_namespace:production" not in got  # the mapping replaces the default namespace


def test_volcano_weights_are_shares_of_the_whole_cluster_multiplied_down_the_tree():
    queues = {o.name: o for o in state(K8S).objects if isinstance(o, VolcanoQueue)}
    # research 40 % keeps half of it (nlp takes 50 % of research): 20 %, nlp 20 %, production 60 %.
    assert {n: q.weight for n, q in queues.items()} == {"research": 2000, "nlp": 2000, "production": 6000}
    assert queues["production"] == VolcanoQueue("production", 6000, 16, 32, True)


def test_a_grant_raises_the_volcano_guarantee_and_capability():
    queue = objects(K8S, grants=[GovGrant("nlp", 32, 0, 5 * HOUR)])["volcano_queue:nlp"]
    assert (queue.guarantee_gpus, queue.capability_gpus) == (36, 48)


def test_kueue_objects_appear_only_where_kueue_is_installed():
    assert not any(k.startswith("kueue") for k in objects(K8S))
    got = objects(GovOrchestrator("k8s", OrchestratorKind.KUBERNETES, kueue=True))
    assert got["kueue_cluster_queue:research"] == KueueClusterQueue(
        "research", "gpuportal", "default-flavor", 8, 16, None
    )
    assert "kueue_local_queue:serving/production" in got


KUEUE = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES, kueue=True, pool_gpus=64)


def test_the_gpus_guaranteed_to_no_team_sit_in_the_cohorts_lender_queue():
    # the teams' ClusterQueues hold 8 + 4 + 16 = 28 of the pool's 64 as nominal quota; the other 36 are lent
    lender = objects(KUEUE)[f"kueue_cluster_queue:{kueue_lender_name('gpuportal')}"]
    assert lender == KueueClusterQueue("gpuportal-unguaranteed", "gpuportal", "default-flavor", 36, 0, None)
    assert sum(q.nominal_gpus for q in objects(KUEUE).values() if isinstance(q, KueueClusterQueue)) == 64


@given(pool=st.integers(0, 200), guarantees=st.lists(st.integers(0, 64), min_size=1, max_size=5))
def test_the_lender_holds_the_pool_less_every_guarantee_and_never_less_than_nothing(pool, guarantees):
    teams = tuple(GovTeam(f"t{i}", None, ()) for i in range(len(guarantees)))
    queues = tuple(GovQueue(f"t{i}", 10, g, g + 8) for i, g in enumerate(guarantees))
    orch = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES, kueue=True, pool_gpus=pool)
    got = [o for o in state(orch, teams=teams, queues=queues).objects if isinstance(o, KueueClusterQueue)]
    [lender] = [q for q in got if q.name == kueue_lender_name("gpuportal")]
    guaranteed = sum(q.nominal_gpus for q in got if q is not lender)
    assert lender.nominal_gpus == max(0, pool - guaranteed) and lender.borrowing_limit_gpus == 0
    assert {q.cohort for q in got} == {"gpuportal"}  # lends only within the teams' cohort


def test_native_reclaim_mode_makes_kueue_reclaim_within_the_cohort():
    assert {q.reclaim_within_cohort for q in objects(KUEUE).values() if isinstance(q, KueueClusterQueue)} == {"Never"}
    native = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES, kueue=True, kueue_reclaim=True, pool_gpus=64)
    got = state(native)
    queues = {o.name: o for o in got.objects if isinstance(o, KueueClusterQueue)}
    assert queues["nlp"].reclaim_within_cohort == "Any"
    assert any("Kueue evicts borrowers" in reason for reason in got.reasons["kueue_cluster_queue:nlp"])


def test_a_team_may_not_take_the_lender_queues_name():
    [problem] = team_name_problems(GovTeam("gpuportal-unguaranteed", None, ()), KUEUE)
    assert problem.field == "team.slug" and "guaranteed to no team in cohort gpuportal" in problem.message
    assert team_name_problems(GovTeam("gpuportal-unguaranteed", None, ()), K8S) == []  # no Kueue there


def test_ray_gets_pool_bounds_only_and_says_so():
    got = state(RAY, bounds={"sweeps": Bounds("sweeps", 8, 32, rule="nights")})
    assert got.objects == (RayPoolBounds("sweeps", 8, 32),) and got.notes == (RAY_POOL_ONLY,)
    assert state(RAY).objects == (RayPoolBounds("sweeps", 0, 64),)


def test_every_object_carries_the_reasons_that_produced_it():
    got = state(grants=[GovGrant("nlp", 32, 0, 5 * HOUR)])
    assert got.reasons["slurm_account:nlp"][1] == "GrpTRES gres/gpu=48: cap 48 GPUs = burst limit 16 + 32 granted"


@pytest.mark.parametrize(
    ("teams", "queues", "field", "words"),
    [
        ((GovTeam("nlp", "research"),), (), "team.parent", "parent 'research' is not a team"),
        ((GovTeam("a", None, (), ("x",)), GovTeam("b", None, (), ("x",))), (), "team.namespaces", "mapped to both"),
        ((GovTeam("a"),), (GovQueue("a", 140, 0, 0),), "queue.weight", "not within 0-100"),
        ((GovTeam("a"),), (GovQueue("a", 10, 9, 4),), "queue.guaranteed", "guaranteed <= burst limit"),
        ((GovTeam("a"),), (GovQueue("ghost", 10, 0, 4),), "queue.team", "unknown team 'ghost'"),
    ],
)
def test_input_that_cannot_be_enforced_is_refused_naming_the_field_and_the_rule(teams, queues, field, words):
    with pytest.raises(GovernanceInputError) as error:
        desired_state(GovernanceInput(teams, queues), [SLURM, K8S], HOUR)
    assert any(p.field == field and words in p.message for p in error.value.problems), error.value.problems


@pytest.mark.parametrize(
    ("team", "orchestrator", "field", "words"),
    [
        (GovTeam("a", None, (), ("Not_DNS",)), "k8s", "team.namespaces", "namespace 'Not_DNS' is not a DNS-1123 label"),
        (GovTeam("ML_Ops"), "k8s", "team.slug", "'ML_Ops' names a queue and is not a DNS-1123 label"),
        (GovTeam("portal"), "hpc", "team.slug", "may not be named 'portal'"),
        (GovTeam("-x"), "hpc", "team.slug", "'-x' is not a Slurm account name"),
    ],
)
def test_a_team_one_orchestrator_cannot_name_is_left_out_there_alone(team, orchestrator, field, words):
    teams = (*TEAMS, team, GovTeam("child", team.slug))
    states = desired_state(GovernanceInput(teams, QUEUES), [SLURM, K8S, RAY], HOUR)
    skipped = states[orchestrator].skipped
    assert any(p.field == field and words in p.message for p in skipped), skipped
    keys = {o.key for o in states[orchestrator].objects}
    assert "child" not in keys and "research" in keys  # the sub-team goes with it; the others are governed
    assert any("child is under" in p.message for p in skipped)
    if team.slug != "-x":  # a name neither can use
        other = "hpc" if orchestrator == "k8s" else "k8s"
        assert not any(team.slug in p.message for p in states[other].skipped)  # the other target names it fine


def test_an_identity_override_to_a_name_slurm_refuses_is_an_error():
    orch = GovOrchestrator("hpc", OrchestratorKind.SLURM, user_overrides={"alice": "alice smith"})
    with pytest.raises(GovernanceInputError, match="user_overrides: hpc: 'alice' -> 'alice smith' is not a valid"):
        desired_state(GovernanceInput(TEAMS, QUEUES), [orch], HOUR)


# -------------------------------------------------------------------------------------------- diff


def test_missing_objects_are_created_and_differing_ones_updated_field_by_field():
    want = state()
    observed = [SlurmAccount("research", "portal", 3000, (("gres/gpu", 24),)), SlurmUser("bob", "production")]
    result = diff(want, observed)
    research = next(c for c in result.changes if c.id == "slurm_account:research")
    assert research.action is Action.UPDATE and [(f.field, f.before, f.after) for f in research.fields] == [
        ("fairshare", 3000, 4000)
    ]
    assert next(c for c in result.changes if c.id == "slurm_user:production/bob").action is Action.UNCHANGED
    assert {c.id for c in result.by_action(Action.CREATE)} >= {"slurm_account:portal", "slurm_account:nlp"}


def test_only_objects_the_portal_applied_are_ever_deleted_and_hand_made_ones_are_left_alone():
    gone = SlurmAccount("oldteam", "portal", 100)
    handmade = SlurmAccount("vision", "root", 1)
    result = diff(state(), [gone, handmade], [gone])
    assert [c.id for c in result.by_action(Action.DELETE)] == ["slurm_account:oldteam"]
    assert result.unmanaged == ("slurm_account:vision",)


def test_a_hand_edit_since_the_last_apply_is_drift_with_its_fields():
    applied = SlurmAccount("research", "portal", 4000, (("gres/gpu", 24),))
    edited = SlurmAccount("research", "portal", 4000, (("gres/gpu", 99),))
    (drift,) = diff(state(), [edited], [applied]).drifts
    assert drift.id == "slurm_account:research" and drift.observed == edited
    assert [(f.field, f.before, f.after) for f in drift.fields] == [
        ("grp_tres", (("gres/gpu", 24),), (("gres/gpu", 99),))
    ]


def test_an_object_deleted_by_hand_is_drift_and_is_created_again():
    applied = K8sResourceQuota("prod", "gpuportal-gpu", 32)
    result = diff(state(K8S), [], [applied])
    assert [d.id for d in result.drifts] == ["k8s_resource_quota:prod/gpuportal-gpu"] and result.drifts[
        0
    ].observed is None
    assert "k8s_resource_quota:prod/gpuportal-gpu" in {c.id for c in result.by_action(Action.CREATE)}


def test_nothing_changes_and_nothing_drifts_once_the_desired_state_is_applied():
    want = state(K8S)
    result = diff(want, want.objects, want.objects)
    assert {c.action for c in result.changes} == {Action.UNCHANGED} and result.drifts == () and result.unmanaged == ()


weights = st.integers(min_value=0, max_value=100)


@given(st.lists(st.tuples(weights, st.integers(0, 8), st.integers(0, 8)), min_size=1, max_size=12), st.data())
def test_for_any_team_tree_applied_state_is_a_fixed_point_and_volcano_weights_are_positive(rows, data):
    teams, queues = [], []
    for i, (weight, guaranteed, extra) in enumerate(rows):
        parent = data.draw(st.sampled_from([None, *[t.slug for t in teams]]))
        teams.append(GovTeam(f"t{i}", parent, (f"u{i}",)))
        queues.append(GovQueue(f"t{i}", weight, guaranteed, guaranteed + extra))
    states = desired_state(GovernanceInput(tuple(teams), tuple(queues)), [SLURM, K8S, RAY], HOUR)
    for desired in states.values():
        result = diff(desired, desired.objects, desired.objects)
        assert {c.action for c in result.changes} == {Action.UNCHANGED} and not result.drifts
    assert all(q.weight >= 1 for q in states["k8s"].objects if isinstance(q, VolcanoQueue))
    assert len({object_id(o) for o in states["hpc"].objects}) == len(states["hpc"].objects)
