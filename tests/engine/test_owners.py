"""Whose workload is it (engine/owners.py): defaults, overrides, ambiguity, and refused overrides."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.governance_state import GovernanceInputError
from scheduling.engine.owners import (
    Claim,
    NameKind,
    Override,
    OwnerMap,
    kubernetes_claims,
    ray_claims,
)

SLURM, LABEL, SA, NS, RAY = (
    NameKind.SLURM_USER,
    NameKind.KUBERNETES_LABEL,
    NameKind.KUBERNETES_SERVICE_ACCOUNT,
    NameKind.KUBERNETES_NAMESPACE,
    NameKind.RAY_SUBMITTER,
)
USERS = {"alice", "bob", "carol"}


def owner(claims, overrides=(), orchestrator="hpc", users=USERS) -> str:
    return OwnerMap(users, overrides).owner(claims, orchestrator).username


def test_a_slurm_user_with_a_portal_username_is_that_user_by_default():
    assert owner([Claim(SLURM, "alice")]) == "alice"


def test_a_name_no_portal_user_has_maps_to_nobody_and_says_why():
    found = OwnerMap(USERS).owner([Claim(SLURM, "root")], "hpc")
    assert found.username == ""
    assert found.reason == "slurm_user root is no portal user"


def test_an_override_maps_a_cluster_user_to_a_portal_user():
    overrides = [Override(SLURM, "asmith", "alice", "hpc")]
    found = OwnerMap(USERS, overrides).owner([Claim(SLURM, "asmith")], "hpc")
    assert found.username == "alice"
    assert found.reason == "slurm_user asmith is alice (override on hpc)"


def test_an_override_beats_the_default_even_when_the_name_is_another_portal_user():
    assert owner([Claim(SLURM, "bob")], [Override(SLURM, "bob", "carol")]) == "carol"


def test_an_orchestrators_own_override_beats_a_fleet_wide_one():
    overrides = [Override(SLURM, "svc", "alice"), Override(SLURM, "svc", "bob", "hpc")]
    assert owner([Claim(SLURM, "svc")], overrides, "hpc") == "bob"
    assert owner([Claim(SLURM, "svc")], overrides, "other") == "alice"


def test_an_override_for_another_orchestrator_does_not_apply():
    assert owner([Claim(SLURM, "asmith")], [Override(SLURM, "asmith", "alice", "hpc")], "hpc-2") == ""


def test_a_name_several_users_claim_is_nobodys_and_the_next_claim_decides():
    overrides = [Override(SA, "ml/runner", "alice"), Override(SA, "ml/runner", "bob")]
    claims = [Claim(SA, "ml/runner"), Claim(NS, "ml")]
    found = OwnerMap(USERS, overrides).owner(claims, "k8s")
    assert found.username == ""
    assert "claimed by alice, bob" in found.reason
    assert owner(claims, [*overrides, Override(NS, "ml", "carol")], "k8s") == "carol"


def test_service_accounts_and_namespaces_belong_to_nobody_without_an_override():
    assert owner([Claim(SA, "alice/alice"), Claim(NS, "alice")], users=USERS) == ""


def test_a_kubernetes_label_wins_over_the_service_account_and_namespace():
    overrides = [Override(SA, "ml/runner", "bob"), Override(NS, "ml", "carol")]
    claims = kubernetes_claims({"gpuportal.io/user": "alice"}, "ml", "runner")
    assert [c.kind for c in claims] == [LABEL, SA, NS]
    assert owner(claims, overrides) == "alice"
    assert owner(kubernetes_claims({}, "ml", "runner"), overrides) == "bob"
    assert owner(kubernetes_claims({}, "ml", ""), overrides) == "carol"


def test_the_first_present_label_key_is_the_label_claim():
    claims = kubernetes_claims({"user": "bob"}, "ml", "", label_keys=("gpuportal.io/user", "user"))
    assert claims[0] == Claim(LABEL, "bob")


def test_a_ray_submitter_comes_from_metadata_user_then_submitter():
    assert ray_claims({"submitter": "bob", "team": "llm"}) == (Claim(RAY, "bob"),)
    assert ray_claims({"user": "alice", "submitter": "bob"}) == (Claim(RAY, "alice"),)
    assert ray_claims({"team": "llm"}) == ()
    assert owner(ray_claims({"submitter": "bob"})) == "bob"


def test_no_claims_map_to_nobody():
    found = OwnerMap(USERS).owner([], "hpc")
    assert (found.username, found.reason) == ("", "the orchestrator names no submitter")


def test_an_override_naming_an_unknown_user_is_refused_naming_the_field():
    with pytest.raises(GovernanceInputError, match="user: 'zed' is not a portal user") as error:
        OwnerMap(USERS, [Override(SLURM, "z", "zed")])
    assert [p.field for p in error.value.problems] == ["user"]


@pytest.mark.parametrize(
    ("kind", "name"),
    [(SLURM, "alice smith"), (SA, "runner"), (SA, "ML/Runner"), (NS, "Not_A_Namespace"), (LABEL, "-x"), (RAY, " ")],
)
def test_an_override_with_a_name_its_kind_cannot_have_is_refused_naming_the_field(kind, name):
    with pytest.raises(GovernanceInputError, match=r"name: .* is not ") as error:
        OwnerMap(USERS, [Override(kind, name, "alice")])
    assert [p.field for p in error.value.problems] == ["name"]


def test_governance_reads_the_cluster_user_of_each_portal_user_from_the_same_overrides():
    overrides = [
        Override(SLURM, "asmith", "alice", "hpc"),
        Override(SLURM, "shared", "alice"),
        Override(SLURM, "shared", "bob"),
        Override(RAY, "bobby", "bob"),
    ]
    assert OwnerMap(USERS, overrides).cluster_names(SLURM, "hpc") == {"alice": "asmith", "bob": "shared"}


names = st.text(alphabet="abcxyz", min_size=1, max_size=3)


@given(st.lists(st.tuples(names, st.sampled_from(sorted(USERS))), max_size=8), names)
def test_a_mapped_owner_is_always_a_portal_user_an_override_names_or_the_name_itself(pairs, name):
    overrides = [Override(SLURM, cluster, user) for cluster, user in pairs]
    found = owner([Claim(SLURM, name)], overrides, users=USERS | {name})
    claimants = {user for cluster, user in pairs if cluster == name}
    if claimants:
        assert found == (next(iter(claimants)) if len(claimants) == 1 else "")
    else:
        assert found == name
