"""Who may see what: the one module pages, the API, services and reports ask.

Built on the predicates in ``scheduling/rules.py`` and the team tree (``Team.objects.tree()``):

- portal admins (``rules.is_portal_admin``; superusers too) see every team and every row;
- everyone else sees the teams they belong to and everything below them (``rules.is_member``: a member
  of a team or of a team above it), the rows of those teams, and always their own quota requests;
- leads decide within the teams they lead and below, never their own request (``rules.is_lead``);
- what-if scenarios are read by their author, by admins, by members of any team for fleet-wide ones, and
  by the branch of the team they were run for (its members, and the teams above and below);
- the weekly report's per-user rows are read by admins and by leads for the teams they lead and below
  (Open XDMoD's rule: a PI sees their group's users, staff see everyone); the utilisation drill-down follows
  the same rule, and shows any other member of a team only their own row (XDMoD's "user" role).
"""

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from scheduling.models import Membership, QuotaRequest, Team, TeamTree, WhatIfScenario, Workload
from scheduling.models.teams import once_per_scope
from scheduling.rules import is_portal_admin


def sees_everything(user) -> bool:
    """Portal admins (superusers included): every team, every row. The predicate is asked directly:
    ``has_perm`` reads the user's model permissions first, a query per request."""
    return is_portal_admin(user)


def team_ids_visible_to(user) -> set[int] | None:
    """Teams the user may see; ``None`` means every team. One query: the tree with a flag on the user's
    teams."""
    if sees_everything(user):
        return None
    if not user.is_authenticated:
        return set()
    return _my_teams(user)[0]


def _my_teams(user) -> tuple[set[int], set[int]]:
    """The teams a signed-in user sees (theirs and below) and leads (theirs and below): one read of the tree with
    two flags on it, once per request."""
    return once_per_scope(("my-teams", user.pk), lambda: _read_my_teams(user))


def _read_my_teams(user) -> tuple[set[int], set[int]]:
    member = Membership.objects.filter(user=user, team=OuterRef("pk"))
    tree = (
        Team.objects.only("pk", "parent_id", "slug")
        .annotate(mine=Exists(member), leads=Exists(member.filter(role=Membership.Role.LEAD)))
        .tree()
    )
    teams = tree.teams.items()
    return tree.subtrees(tid for tid, t in teams if t.mine), tree.subtrees(tid for tid, t in teams if t.leads)


def team_or_404(user, slug: str, queryset: QuerySet | None = None) -> Team:
    """The team ``slug``, or a 404 when the user may not see it: the same answer as a team that does not exist,
    so a page or the API never tells an outsider which teams there are."""
    team = get_object_or_404(Team.objects.all() if queryset is None else queryset, slug=slug)
    if not user.has_perm("scheduling.see_team", team):
        raise Http404("No team matches the given query.")
    return team


def teams_visible_to(user) -> list[Team]:
    """The visible teams themselves, by slug (the teams a user may file a quota request for)."""
    ids = team_ids_visible_to(user)
    teams = Team.objects.all() if ids is None else Team.objects.filter(pk__in=ids)
    return list(teams.order_by("slug"))


def lead_team_ids(user, tree: TeamTree | None = None) -> set[int]:
    """Teams the user leads, with everything below them (where they decide quota requests); ``tree`` when
    the caller has read it already."""
    if not user.is_authenticated:
        return set()
    tree = tree or Team.objects.tree()
    mine = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values_list("team_id", flat=True)
    return tree.subtrees(mine)


def only_visible(queryset: QuerySet, user, field: str = "team_id") -> QuerySet:
    ids = team_ids_visible_to(user)
    return queryset if ids is None else queryset.filter(**{f"{field}__in": ids})


def pools_or_visible(queryset: QuerySet, user) -> QuerySet:
    """Usage rows: whole-pool rows (no team) for everyone, team rows for the teams the user may see."""
    ids = team_ids_visible_to(user)
    return queryset if ids is None else queryset.filter(Q(team__isnull=True) | Q(team_id__in=ids))


def quota_requests_visible_to(user, queryset: QuerySet | None = None) -> QuerySet:
    """The requests of the teams the user may see, and their own requests wherever they filed them (the
    same rule as ``scheduling.view_quota_request``)."""
    queryset = QuotaRequest.objects.all() if queryset is None else queryset
    ids = team_ids_visible_to(user)
    if ids is None:
        return queryset
    return queryset.filter(Q(requester_id=user.pk) | Q(team_id__in=ids))


def quota_requests_decidable_by(user) -> QuerySet:
    """Submitted requests waiting for this user's decision (``scheduling.decide_quota_request``)."""
    waiting = QuotaRequest.objects.filter(state=QuotaRequest.State.SUBMITTED)
    if sees_everything(user):
        return waiting
    return waiting.filter(team_id__in=lead_team_ids(user)).exclude(requester_id=user.pk)


def whatifs_readable_by(user) -> QuerySet:
    """Scenarios the user may open: admins all; others their own, fleet-wide ones (no team) if they are in
    a team, and those run for a team in their branch (their teams, the teams above and below them)."""
    scenarios = WhatIfScenario.objects.select_related("created_by", "team")
    if sees_everything(user):
        return scenarios
    mine = set(Membership.objects.filter(user=user).values_list("team_id", flat=True))
    if not mine:
        return scenarios.filter(created_by_id=user.pk)
    tree = Team.objects.only("pk", "parent_id", "slug").tree()
    branch = tree.subtrees(mine) | {above for tid in mine for above in tree.ancestors(tid)}
    return scenarios.filter(Q(created_by_id=user.pk) | Q(team__isnull=True) | Q(team_id__in=branch))


def report_scope(user, tree: TeamTree | None = None) -> frozenset[str] | None:
    """Team slugs whose per-user report rows ``user`` may read: all (None) for admins, else the teams they
    lead and everything below them. ``tree`` when the caller asks for many users."""
    if sees_everything(user):
        return None
    tree = tree or Team.objects.tree()
    return frozenset(tree.teams[tid].slug for tid in lead_team_ids(user, tree) if tid in tree.teams)


def usage_users_readable_by(user, team: Team, tree: TeamTree | None = None) -> frozenset[str] | None:
    """Whose per-user usage rows of ``team`` (its whole subtree) ``user`` may read by name: everyone's (None)
    for admins and for leads of the team or a team above it (``report_scope``, the weekly report's rule); their
    own username for anyone else who may see the team; nobody (empty) for the rest. Rows of others a member may
    not read are summed into one unnamed row, so the team's total still adds up."""
    tree = tree or Team.objects.tree()
    scope = report_scope(user, tree)
    if scope is None or team.slug in scope:
        return None
    if not user.has_perm("scheduling.see_team", team):
        return frozenset()
    return frozenset({user.get_username()})


def group_mappings_visible_to(user, queryset: QuerySet) -> QuerySet:
    """Group mappings: admins all; others those of the teams they may see (who joins their teams, and how);
    a user in no team none."""
    return only_visible(queryset, user)


def identity_overrides_visible_to(user, queryset: QuerySet) -> QuerySet:
    """Identity overrides (whose a submitter name is): admins all; others their own."""
    return queryset if sees_everything(user) else queryset.filter(user_id=user.pk)


def in_no_team(user) -> bool:
    """Signed in, not an admin, and a member of no team: sees no team's figures (one membership query; the tree
    is not needed for a yes or no)."""
    return not sees_everything(user) and not Membership.objects.filter(user_id=user.pk).exists()


def workloads_visible_to(user, queryset: QuerySet | None = None) -> QuerySet:
    """Workloads of the teams the user may see (the API's ``/workloads/`` and the job page agree on it), by the
    drill-down's rule for whose: admins and the leads of a team (or one above it) see all of its workloads;
    another member sees their own, and the others' only while active (pending or running: the queue the team
    page shows, who waits before them), never a teammate's history."""
    rows = Workload.objects.all() if queryset is None else queryset
    if sees_everything(user):
        return rows
    if not user.is_authenticated:
        return rows.none()
    visible, led = _my_teams(user)
    own = Q(user=user.get_username())
    return rows.filter(team_id__in=visible).filter(Q(team_id__in=led) | own | Q(state__in=Workload.ACTIVE_STATES))
