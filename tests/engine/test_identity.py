"""Group-to-team mapping rules (scheduling/engine/identity.py): groups in, memberships out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.identity import (
    LEAD,
    MAPPED,
    RESEARCHER,
    GroupRule,
    HeldMembership,
    memberships_from_groups,
    plan_sync,
)

RULES = [
    GroupRule("gpu-vision-*", "vision"),
    GroupRule("gpu-vision-leads", "vision", LEAD),
    GroupRule("nlp", "nlp"),
]


def test_a_pattern_grants_its_team_to_every_matching_group():
    assert memberships_from_groups(["gpu-vision-students"], RULES) == {"vision": RESEARCHER}


def test_the_strongest_role_wins_whatever_the_rule_order():
    groups = ["gpu-vision-leads"]
    assert memberships_from_groups(groups, RULES) == {"vision": LEAD}
    assert memberships_from_groups(groups, list(reversed(RULES))) == {"vision": LEAD}


def test_group_names_match_case_insensitively_and_exactly_without_wildcards():
    assert memberships_from_groups(["NLP"], RULES) == {"nlp": RESEARCHER}
    assert memberships_from_groups(["nlp-alumni"], RULES) == {}


def test_no_groups_grant_nothing():
    assert memberships_from_groups([], RULES) == {}


def test_sync_adds_changes_and_removes_only_mapped_memberships():
    held = {
        "vision": HeldMembership(RESEARCHER, MAPPED),
        "nlp": HeldMembership(RESEARCHER, MAPPED),
        "ops": HeldMembership(LEAD, "manual"),
    }
    plan = plan_sync(held, {"vision": LEAD, "robotics": RESEARCHER})
    assert plan.add == {"robotics": RESEARCHER}
    assert plan.change == {"vision": LEAD}
    assert plan.remove == frozenset({"nlp"})


def test_sync_never_touches_a_membership_an_admin_typed_in():
    held = {"ops": HeldMembership(RESEARCHER, "manual")}
    assert plan_sync(held, {"ops": LEAD}).empty
    assert plan_sync(held, {}).empty


groups = st.lists(st.sampled_from(["gpu-vision-leads", "gpu-vision-x", "nlp", "NLP", "other", "gpu-visionx"]))
roles = st.sampled_from([RESEARCHER, LEAD])
held_memberships = st.dictionaries(
    st.sampled_from(["vision", "nlp", "ops"]), st.builds(HeldMembership, roles, st.sampled_from([MAPPED, "manual"]))
)


@settings(max_examples=200, deadline=None)
@given(groups, held_memberships)
def test_after_a_sync_the_mapped_memberships_are_exactly_what_the_groups_grant(group_list, held):
    granted = memberships_from_groups(group_list, RULES)
    plan = plan_sync(held, granted)
    after = {team: m for team, m in held.items() if team not in plan.remove}
    after |= {team: HeldMembership(role, MAPPED) for team, role in {**plan.add, **plan.change}.items()}
    hand_made = {team: m for team, m in held.items() if m.source != MAPPED}
    mapped = {team: m.role for team, m in after.items() if m.source == MAPPED}
    assert mapped == {team: role for team, role in granted.items() if team not in hand_made}
    assert {team: m for team, m in after.items() if m.source != MAPPED} == hand_made
    assert plan_sync(after, granted).empty  # a second sync with the same groups writes nothing


@settings(max_examples=200, deadline=None)
@given(groups, groups)
def test_more_groups_never_grant_less(group_list, extra):
    fewer = memberships_from_groups(group_list, RULES)
    more = memberships_from_groups(group_list + extra, RULES)
    assert set(fewer) <= set(more)
    assert all(more[team] == LEAD for team, role in fewer.items() if role == LEAD)
