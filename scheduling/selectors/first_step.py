"""Each signed-in user's first step, for the overview: what their role does first, and for a user in no team,
who to ask (a page with no way forward left them stuck: every team figure hidden, the quota form empty)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.models import Membership
from scheduling.rules import is_portal_admin, portal_admins

ADMINS_NAMED = 5  # beyond this, "and N more": the line stays one line


@dataclass(frozen=True)
class FirstStep:
    role: str  # admin | lead | member | no team
    text: str
    url_name: str = ""  # a page they may open ("" : none, the text says whom to ask)
    label: str = ""


def admins_to_ask() -> str:
    """The portal admins by name (who adds a user to a team or maps their directory group)."""
    names = list(portal_admins().order_by("username").values_list("username", flat=True)[: ADMINS_NAMED + 1])
    if not names:
        return "a portal admin"
    shown = ", ".join(names[:ADMINS_NAMED]) + (" and others" if len(names) > ADMINS_NAMED else "")
    return f"a portal admin ({shown})"


def first_step(user) -> FirstStep:
    if is_portal_admin(user):
        return FirstStep(
            "admin", "Check that governance reaches the clusters, then decide what waits for you.", "governance",
            "Governance",
        )
    roles = set(Membership.objects.filter(user_id=user.pk).values_list("role", flat=True))
    if Membership.Role.LEAD in roles:
        return FirstStep(
            "lead", "Decide your teams' quota requests and watch their use.", "quota-list", "Quota requests"
        )
    if roles:
        return FirstStep(
            "member", "See why your jobs wait, or ask your team for more GPUs.", "my-workloads", "My workloads"
        )
    return FirstStep(
        "no team",
        "You are in no team yet, so no team's figures or quota are yours to see or ask for. Ask your team's lead to "
        f"add you, or {admins_to_ask()}. Meanwhile the fleet's pools, utilisation and weekly reports are open to you.",
        "report-list",
        "Weekly reports",
    )
