"""Template context for every page: which team pages the user may open, so a page links only those.

Without it the overview linked every team, and a researcher got a 404 on five of six links."""

from django.utils.functional import SimpleLazyObject

from scheduling.models import Team
from scheduling.selectors import access
from scheduling.selectors import inbox as inbox_selectors


class _EveryTeam:
    def __contains__(self, slug: object) -> bool:
        return True


def openable_teams(request) -> dict[str, object]:
    """``openable_team_slugs``: ``{% if t.slug in openable_team_slugs %}`` links a team; computed on first use."""

    def slugs():
        ids = access.team_ids_visible_to(request.user)
        if ids is None:
            return _EveryTeam()
        return frozenset(Team.objects.filter(pk__in=ids).values_list("slug", flat=True))

    return {"openable_team_slugs": SimpleLazyObject(slugs)}


def inbox(request) -> dict[str, object]:
    """``unread_messages``: the user's unread inbox rows, counted on first use (one COUNT on the index)."""
    return {"unread_messages": SimpleLazyObject(lambda: inbox_selectors.unread_count(request.user))}
