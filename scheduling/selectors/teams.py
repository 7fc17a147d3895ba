"""Each team's standing now (who sees which teams: ``selectors/access.py``)."""

from dataclasses import dataclass

from django.db.models import F, Q, Sum
from django.utils import timezone

from scheduling.models import Queue, Team, Workload
from scheduling.selectors.entitlements import team_entitlements


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
    """Each team's entitlement (``selectors/entitlements``: its queues, any-model or per GPU model, and active
    grants; weight from the any-model queue) and what it and its sub-teams hold and wait for now."""
    tree = Team.objects.tree()
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="")}
    entitled = team_entitlements(timezone.now())
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
        q, mine = queues.get(team.pk), entitled.get(team.slug)
        rows.append(
            TeamNow(
                team.slug,
                team.name,
                depth,
                float(q.weight) if q else 0.0,
                mine.guaranteed if mine else 0,
                (mine.cap or 0) if mine else 0,
                sum(a for a, _p in held),
                sum(p for _a, p in held),
            )
        )
    return rows
