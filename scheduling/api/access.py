"""Which teams a user may see: admins all; others their teams and everything below them."""

from django.db.models import Exists, OuterRef, Q, QuerySet

from scheduling.models import Membership, Team


def visible_team_ids(user) -> set[int] | None:
    """``None`` means every team (admins)."""
    if user.is_staff:
        return None
    if not user.is_authenticated:
        return set()
    # One query: the tree with a flag on the teams the user belongs to (each API request pays for it).
    member = Membership.objects.filter(user=user, team=OuterRef("pk"))
    children: dict[int | None, list[int]] = {}
    frontier: list[int] = []
    for team_id, parent_id, is_member in Team.objects.values_list("pk", "parent_id", Exists(member)):
        children.setdefault(parent_id, []).append(team_id)
        if is_member:
            frontier.append(team_id)
    seen: set[int] = set()
    while frontier:
        team_id = frontier.pop()
        if team_id not in seen:
            seen.add(team_id)
            frontier.extend(children.get(team_id, ()))
    return seen


def only_visible(queryset: QuerySet, user, field: str = "team_id") -> QuerySet:
    ids = visible_team_ids(user)
    return queryset if ids is None else queryset.filter(**{f"{field}__in": ids})


def pools_or_visible(queryset: QuerySet, user) -> QuerySet:
    """Usage rows: whole-pool rows (no team) for everyone, team rows for the teams the user may see."""
    ids = visible_team_ids(user)
    return queryset if ids is None else queryset.filter(Q(team__isnull=True) | Q(team_id__in=ids))
