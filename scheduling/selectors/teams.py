"""Each team's standing now (who sees which teams: ``selectors/access.py``)."""

from dataclasses import dataclass

from django.db.models import F, Q, Sum

from scheduling.models import Queue, Team, Workload


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
    tree = Team.objects.tree()
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
    for team, depth in tree.walk():
        if allowed is not None and team.pk not in allowed:
            continue
        held = [usage.get(tid, (0, 0)) for tid in tree.subtree(team.pk)]
        q = queues.get(team.pk)
        rows.append(
            TeamNow(
                team.slug,
                team.name,
                depth,
                float(q.weight) if q else 0.0,
                q.guaranteed if q else 0,
                q.burst_limit if q else 0,
                sum(a for a, _p in held),
                sum(p for _a, p in held),
            )
        )
    return rows
