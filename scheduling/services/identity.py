"""Who is who: team memberships from the site's identity provider (applied at every sign-in and by the
periodic re-sync), and the portal user behind each orchestrator's submitter names.

The membership rules are ``GroupMapping`` rows, decided by engine/identity.py. A sync changes only
memberships whose ``source`` is ``mapping``; one typed in by an admin is left alone. Each write is in the
membership's history with the groups that caused it (the author is empty: the directory, not a person, decided).

Submitter names map by engine/owners.py, with the admins' ``IdentityOverride`` rows: ingest reads
``owner_map`` each collection round, Slurm governance its cluster user per member.
"""

import logging
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.engine.identity import (
    MAPPED,
    GroupRule,
    HeldMembership,
    SyncPlan,
    is_catch_all,
    memberships_from_groups,
    plan_sync,
)
from scheduling.engine.owners import PERSONAL, Claim, NameKind, Override, OwnerMap, override_problems
from scheduling.models import ExternalIdentity, GroupMapping, IdentityOverride, Membership, Team
from scheduling.services.audit import save_audited, stamp_author

logger = logging.getLogger(__name__)
REASON_MAX_GROUPS = 20  # an audit reason names this many groups at most (a directory may list hundreds)


def group_rules() -> list[GroupRule]:
    return [
        GroupRule(pattern, team, role)
        for pattern, team, role in GroupMapping.objects.values_list("pattern", "team__slug", "role")
    ]


def owner_map(claims: Iterable[Claim] | None = None) -> OwnerMap:
    """The overrides and the portal usernames the default may map to: those among ``claims``' personal names
    (a collection round asks for its own, not for every account), or all of them when ``claims`` is None."""
    rows = IdentityOverride.objects.values_list("kind", "name", "user__username", "orchestrator__name")
    overrides = [
        Override(NameKind(kind), name, username, orchestrator or "") for kind, name, username, orchestrator in rows
    ]
    users = get_user_model().objects.all()
    if claims is not None:
        users = users.filter(username__in={c.name for c in claims if c.kind in PERSONAL})
    usernames = {*users.values_list("username", flat=True), *(o.username for o in overrides)}
    # Rows are checked when saved; one written around the checks must not stop every collection round.
    usable = [o for o in overrides if not override_problems(o, frozenset(usernames))]
    if len(usable) < len(overrides):
        logger.warning("identity overrides left out (invalid): %s", [o for o in overrides if o not in usable])
    return OwnerMap(usernames, usable)


def save_identity_override(override: IdentityOverride, *, by, reason: str) -> IdentityOverride:
    """An admin's override of whose a submitter name is: validated and saved with author and reason; active
    workloads follow at their orchestrator's next collection round."""
    save_audited(override, by=by, reason=reason)
    return override


def save_group_mapping(mapping: GroupMapping, *, by, reason: str) -> GroupMapping:
    """An admin's change of a mapping: validated and saved with author and reason; users' memberships follow
    at their next sign-in or periodic re-sync."""
    check_group_mapping(mapping)
    save_audited(mapping, by=by, reason=reason)
    return mapping


def check_group_mapping(mapping: GroupMapping) -> None:
    """A catch-all pattern (``*``) as lead would make everyone who signs in a lead of the team (deciding its
    quota requests, reading its members' usage): refused, naming the pattern. As researcher it is a choice."""
    if mapping.role == Membership.Role.LEAD and is_catch_all(mapping.pattern.strip()):
        raise ValidationError(
            {
                "pattern": f"{mapping.pattern!r} matches every group: everyone who signs in would lead "
                f"{mapping.team.slug}. Name the leads' group (e.g. gpu-{mapping.team.slug}-leads)."
            }
        )


def owned_elsewhere(user, provider: str) -> bool:
    """Whether ``user`` belongs to another identity source than ``provider``: a local account (a password of its
    own) or one an external sign-in of another provider made. Such an account is never entered by ``provider``."""
    if user.has_usable_password():
        return True
    identity = ExternalIdentity.objects.filter(user=user).values_list("provider", flat=True).first()
    return identity is not None and identity != provider


@transaction.atomic
def sync_memberships(
    user, *, provider: str, subject: str, groups: Iterable[str], rules: list[GroupRule] | None = None
) -> SyncPlan:
    """Bring ``user``'s mapped memberships in line with ``groups`` and remember them for the next re-sync.
    ``rules``: the mappings read once for many users (the re-sync); by default read now."""
    group_list = sorted(set(groups))
    held = {m.team.slug: m for m in Membership.objects.select_for_update().filter(user=user).select_related("team")}
    plan = plan_sync(
        {slug: HeldMembership(m.role, m.source) for slug, m in held.items()},
        memberships_from_groups(group_list, group_rules() if rules is None else rules),
    )
    reason = _sync_reason(provider, group_list)
    _apply(user, plan, held, reason)
    ExternalIdentity.objects.update_or_create(
        user=user,
        defaults={"provider": provider, "subject": subject, "groups": group_list, "synced_at": timezone.now()},
    )
    return plan


def _apply(user, plan: SyncPlan, held: dict[str, Membership], reason: str) -> None:
    teams = Team.objects.in_bulk([*plan.add, *plan.change], field_name="slug")
    for slug, role in plan.add.items():
        _save(Membership(user=user, team=teams[slug], role=role, source=MAPPED), reason)
    for slug, role in plan.change.items():
        held[slug].role = role
        _save(held[slug], reason)
    for slug in plan.remove:
        stamp_author(held[slug], by=None, reason=reason)
        held[slug].delete()


def _save(membership: Membership, reason: str) -> None:
    stamp_author(membership, by=None, reason=reason)
    membership.save()


def _sync_reason(provider: str, groups: list[str]) -> str:
    shown = ", ".join(groups[:REASON_MAX_GROUPS]) or "none"
    more = f" and {len(groups) - REASON_MAX_GROUPS} more" if len(groups) > REASON_MAX_GROUPS else ""
    return f"{provider} group sync; groups: {shown}{more}"
