"""The team tree, who belongs where, and each team's standing."""

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Exists, F, OuterRef, Q, Sum

from scheduling.models import (
    Membership,
    Queue,
    Team,
    Workload,
)


@dataclass(frozen=True)
class TeamNow:
    slug: str
    name: str
    depth: int
    weight: float
    guaranteed: int
    burst_limit: int
    allocated: int
    pending: int


def teams_now(visible: list[Team] | None = None) -> list[TeamNow]:
    """Each team's entitlement (any-model queue) and what it and its sub-teams hold and wait for now."""
    teams = list(Team.objects.all())
    children: dict[int | None, list[Team]] = defaultdict(list)
    for team in teams:
        children[team.parent_id].append(team)
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="")}
    own = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id")
        .annotate(
            allocated=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.RUNNING)),
            pending=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.PENDING)),
        )
    )
    usage = {row["team_id"]: (row["allocated"] or 0, row["pending"] or 0) for row in own}
    allowed = None if visible is None else {t.pk for t in visible}
    rows: list[TeamNow] = []

    def walk(parent_id: int | None, depth: int) -> tuple[int, int]:
        total_alloc = total_pend = 0
        for team in sorted(children[parent_id], key=lambda t: t.slug):
            alloc, pend = usage.get(team.pk, (0, 0))
            index = len(rows)
            sub_alloc, sub_pend = walk(team.pk, depth + 1)
            alloc, pend = alloc + sub_alloc, pend + sub_pend
            if allowed is None or team.pk in allowed:
                q = queues.get(team.pk)
                rows.insert(
                    index,
                    TeamNow(
                        team.slug,
                        team.name,
                        depth,
                        float(q.weight) if q else 0.0,
                        q.guaranteed if q else 0,
                        q.burst_limit if q else 0,
                        alloc,
                        pend,
                    ),
                )
            total_alloc, total_pend = total_alloc + alloc, total_pend + pend
        return total_alloc, total_pend

    walk(None, 0)
    return rows


# --- who sees what -----------------------------------------------------------------------------------


def team_tree() -> tuple[dict[int, Team], dict[int | None, list[int]]]:
    """Every team by id, and each parent's children ids (one query)."""
    teams = {t.pk: t for t in Team.objects.all()}
    children: dict[int | None, list[int]] = defaultdict(list)
    for team in sorted(teams.values(), key=lambda t: t.slug):
        children[team.parent_id].append(team.pk)
    return teams, dict(children)


def subtree_ids(team_id: int, children: dict[int | None, list[int]]) -> list[int]:
    ids, stack = [], [team_id]
    while stack:
        current = stack.pop()
        ids.append(current)
        stack.extend(children.get(current, []))
    return ids


def visible_team_ids(user, see_all: bool) -> set[int]:
    """Teams the user may see: all for admins (``see_all``), else the teams they belong to and everything
    below them (the same lineage rule as ``rules.is_member``), from one query: the tree with a flag on the
    user's teams. The API's visibility (``api/access.py``) is this rule too."""
    if see_all:
        return set(Team.objects.values_list("pk", flat=True))
    if not user.is_authenticated:
        return set()
    member = Membership.objects.filter(user=user, team=OuterRef("pk"))
    children: dict[int | None, list[int]] = defaultdict(list)
    mine = []
    for team_id, parent_id, is_member in Team.objects.values_list("pk", "parent_id", Exists(member)):
        children[parent_id].append(team_id)
        if is_member:
            mine.append(team_id)
    return {tid for root in mine for tid in subtree_ids(root, children)}


def lead_team_ids(user, children: dict[int | None, list[int]] | None = None) -> set[int]:
    """Teams the user leads, with everything below them (where they decide quota requests); ``children``
    is ``team_tree()``'s second half when the caller has it already."""
    if children is None:
        _teams, children = team_tree()
    mine = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values_list("team_id", flat=True)
    return {tid for root in mine for tid in subtree_ids(root, children)}


def submittable_teams(user, see_all: bool) -> list[Team]:
    ids = visible_team_ids(user, see_all)
    return sorted((t for t in team_tree()[0].values() if t.pk in ids), key=lambda t: t.slug)
