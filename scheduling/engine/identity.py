"""Team memberships from identity-provider groups: which teams, in which role, a set of groups grants.

A site's directory (LDAP) or OIDC provider says which groups a person is in; admins write rules
"group pattern -> team, role" (``GroupRule``). The rules are shell-style patterns (``fnmatch``: ``*``,
``?``, ``[seq]``), matched case-insensitively because directories compare group names that way. A person
in several matching groups gets the strongest role any of them grants (lead over researcher).

``plan_sync`` turns "what the groups grant" into the membership changes for one user. Only memberships that
came from a mapping are the rules' to change: one typed in by an admin is left alone, whatever the groups
say, so a break-glass grant survives a directory outage or a missing rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

RESEARCHER = "researcher"
LEAD = "lead"
ROLES = (RESEARCHER, LEAD)  # weakest first: a later role outranks an earlier one

MAPPED = "mapping"
WILDCARDS = "*?["  # the source of a membership a rule made (models.Membership.Source)


@dataclass(frozen=True)
class GroupRule:
    """Members of a group matching ``pattern`` belong to ``team`` (a slug) as ``role``."""

    pattern: str
    team: str
    role: str = RESEARCHER

    def matches_any(self, folded_groups: frozenset[str]) -> bool:
        """Against groups already casefolded: a plain name is one set lookup, a pattern scans them."""
        pattern = self.pattern.casefold()
        if not any(char in pattern for char in WILDCARDS):
            return pattern in folded_groups
        return any(fnmatchcase(group, pattern) for group in folded_groups)


@dataclass(frozen=True)
class HeldMembership:
    """One membership a user holds now, and where it came from (``MAPPED`` or an admin's hand)."""

    role: str
    source: str


@dataclass(frozen=True)
class SyncPlan:
    """The membership writes that bring one user's mapped memberships in line with their groups."""

    add: Mapping[str, str]  # team -> role: no membership in the team yet
    change: Mapping[str, str]  # team -> new role of a mapped membership
    remove: frozenset[str]  # teams whose mapped membership no group grants any more

    @property
    def empty(self) -> bool:
        return not (self.add or self.change or self.remove)


def stronger(role_a: str, role_b: str) -> str:
    return max(role_a, role_b, key=ROLES.index)


def memberships_from_groups(groups: Iterable[str], rules: Iterable[GroupRule]) -> dict[str, str]:
    """Team -> role that ``groups`` grant under ``rules`` (the strongest role where several rules grant one team)."""
    granted: dict[str, str] = {}
    folded = frozenset(group.casefold() for group in groups)
    for rule in rules:
        if rule.matches_any(folded):
            granted[rule.team] = stronger(granted.get(rule.team, rule.role), rule.role)
    return granted


def plan_sync(held: Mapping[str, HeldMembership], granted: Mapping[str, str]) -> SyncPlan:
    """The writes that make the user's mapped memberships equal ``granted``, leaving hand-made ones alone."""
    add = {team: role for team, role in granted.items() if team not in held}
    change = {
        team: role
        for team, role in granted.items()
        if team in held and held[team].source == MAPPED and held[team].role != role
    }
    remove = frozenset(team for team, membership in held.items() if membership.source == MAPPED and team not in granted)
    return SyncPlan(add=add, change=change, remove=remove)


def is_catch_all(pattern: str) -> bool:
    """Whether ``pattern`` matches every group name (``*``, ``**``, ``*?*`` … for any name of one character
    or more): everyone who signs in through the directory or the provider would get its role."""
    return bool(pattern) and set(pattern) <= {"*", "?"} and "*" in pattern and pattern.count("?") <= 1
