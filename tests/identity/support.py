from scheduling.models import Membership


def roles_of(username: str) -> dict[str, tuple[str, str]]:
    """Team slug -> (role, source) of the user's memberships."""
    rows = Membership.objects.filter(user__username=username).values_list("team__slug", "role", "source")
    return {team: (role, source) for team, role, source in rows}
