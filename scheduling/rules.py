"""Role predicates (django-rules): researchers see their team, leads decide within it, staff govern."""

import rules
from django.contrib.auth import get_user_model
from django.db.models import Q

from scheduling.models import Membership, QuotaRequest, Team, WhatIfScenario


def _team_of(obj) -> Team | None:
    if isinstance(obj, Team):
        return obj
    return getattr(obj, "team", None)


def lineage_ids(team: Team | int) -> list[int]:
    """The team and the teams above it, nearest first (no query for a top-level Team)."""
    if isinstance(team, Team) and team.parent_id is None:
        return [team.pk]
    team_id = team.pk if isinstance(team, Team) else team
    return [team_id, *Team.objects.only("pk", "parent_id", "slug").tree().ancestors(team_id)]


def leads_above(team: Team | int):
    """The active leads of the team and of every team above it: the one definition of "a lead of this team or
    above" (issue 34 item 4). :func:`is_lead` asks whether a user is one; notifications tell them."""
    return get_user_model().objects.filter(
        memberships__team_id__in=lineage_ids(team), memberships__role=Membership.Role.LEAD, is_active=True
    ).distinct()


@rules.predicate
def is_portal_admin(user) -> bool:
    """The one test of "portal admin": an active staff member or superuser (``has_perm`` grants a superuser
    everything, so a superuser without staff must not see less than the pages and API give them)."""
    return bool(user.is_active and (user.is_staff or user.is_superuser))


def portal_admins():
    """The active users :func:`is_portal_admin` accepts, as a queryset (who is told what admins are told)."""
    return get_user_model().objects.filter(Q(is_staff=True) | Q(is_superuser=True), is_active=True)


@rules.predicate
def is_member(user, obj) -> bool:
    """A member of the object's team or of any team above it."""
    team = _team_of(obj)
    if team is None or not user.is_authenticated:
        return False
    return Membership.objects.filter(user=user, team_id__in=lineage_ids(team)).exists()


@rules.predicate
def is_lead(user, obj) -> bool:
    """A lead of the object's team or of a team above it (leads decide for their sub-teams too)."""
    team = _team_of(obj)
    if team is None or not user.is_authenticated:
        return False
    return leads_above(team).filter(pk=user.pk).exists()


@rules.predicate
def is_requester(user, request: QuotaRequest) -> bool:
    return isinstance(request, QuotaRequest) and request.requester_id == user.pk


rules.add_perm("scheduling.see_team", is_portal_admin | is_member)
rules.add_perm("scheduling.submit_quota_request", is_portal_admin | is_member)
rules.add_perm("scheduling.view_quota_request", is_portal_admin | is_requester | is_member)
rules.add_perm("scheduling.decide_quota_request", is_portal_admin | (is_lead & ~is_requester))
rules.add_perm("scheduling.edit_entitlements", is_portal_admin)
rules.add_perm("scheduling.edit_pool_policies", is_portal_admin)
rules.add_perm("scheduling.edit_orchestrators", is_portal_admin)
rules.add_perm("scheduling.enforce_governance", is_portal_admin)
rules.add_perm("scheduling.edit_chat_webhooks", is_portal_admin)  # governance plans and drift on the clusters


@rules.predicate
def leads_a_team(user) -> bool:
    return bool(user.is_authenticated and Membership.objects.filter(user=user, role=Membership.Role.LEAD).exists())


@rules.predicate
def is_in_a_team(user) -> bool:
    return bool(user.is_authenticated and Membership.objects.filter(user=user).exists())


@rules.predicate
def is_author(user, scenario: WhatIfScenario) -> bool:
    return isinstance(scenario, WhatIfScenario) and scenario.created_by_id == user.pk


@rules.predicate
def is_fleet_wide(user, scenario: WhatIfScenario) -> bool:
    return isinstance(scenario, WhatIfScenario) and scenario.team_id is None


@rules.predicate
def is_in_branch(user, obj) -> bool:
    """A member of the object's team, of a team above it or of a team below it (a what-if run for a team
    concerns the teams whose share it changes)."""
    team = _team_of(obj)
    if team is None or not user.is_authenticated:
        return False
    tree = Team.objects.only("pk", "parent_id", "slug").tree()
    branch = {*tree.subtree(team.pk), *tree.ancestors(team.pk)}
    return Membership.objects.filter(user=user, team_id__in=branch).exists()


rules.add_perm("scheduling.run_whatif", is_portal_admin | leads_a_team)
rules.add_perm("scheduling.view_whatif", is_portal_admin | is_author | (is_fleet_wide & is_in_a_team) | is_in_branch)
# Pages about the whole fleet's plans (rebalancer, capacity planning) are for team members and admins.
rules.add_perm("scheduling.see_fleet_plans", is_portal_admin | is_in_a_team)
rules.add_perm("scheduling.edit_inventory", is_portal_admin)  # fleet hosts and node aliases
rules.add_perm("scheduling.edit_group_mappings", is_portal_admin)  # directory group -> team, role
rules.add_perm("scheduling.edit_identity_overrides", is_portal_admin)  # submitter name -> portal user
