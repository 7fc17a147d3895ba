"""Which teams a user may see: admins all; others their teams and everything below them."""

from django.db.models import Q, QuerySet

from scheduling.selectors import teams


def visible_team_ids(user) -> set[int] | None:
    """``None`` means every team (admins)."""
    return None if user.is_staff else teams.visible_team_ids(user, see_all=False)


def only_visible(queryset: QuerySet, user, field: str = "team_id") -> QuerySet:
    ids = visible_team_ids(user)
    return queryset if ids is None else queryset.filter(**{f"{field}__in": ids})


def pools_or_visible(queryset: QuerySet, user) -> QuerySet:
    """Usage rows: whole-pool rows (no team) for everyone, team rows for the teams the user may see."""
    ids = visible_team_ids(user)
    return queryset if ids is None else queryset.filter(Q(team__isnull=True) | Q(team_id__in=ids))
