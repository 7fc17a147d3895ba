"""Each team's standing now (who sees which teams: ``selectors/access.py``)."""

from dataclasses import dataclass

from django.db.models import F, Q, Sum
from django.utils import timezone

from scheduling.models import Queue, Team, Workload
from scheduling.selectors.entitlements import team_entitlements

from .entitlement_split import CellShare, SplitTotals, split_totals


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
    granted: int = 0  # its grants in force (in ``guaranteed`` and ``burst_limit`` already: the entitlement rule)
    fleet_cap: int | None = None  # burst limit + grants in force (the split's figure once a round split it)
    split_caps: int | None = None  # its caps summed over the orchestrators (None: no round split it yet)
    shares: tuple[CellShare, ...] = ()  # its share on each orchestrator and GPU model (the last round's)

    @property
    def over_cap(self) -> int:
        """GPUs in use above its fleet cap (0 within it, or with no cap of its own: its parent's applies)."""
        return max(0, self.allocated - self.fleet_cap) if self.fleet_cap else 0

    @property
    def queue_burst(self) -> int:
        """Its queues' own burst limit, without the grants."""
        return max(0, self.burst_limit - self.granted)


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
    split = split_totals(list(visible) if visible is not None else list(Team.objects.all()))
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
                mine.granted if mine else 0,
                *_split_of(split.get(team.pk), mine.cap if mine else None),
            )
        )
    return rows


def _split_of(
    totals: SplitTotals | None, rule_cap: int | None
) -> tuple[int | None, int | None, tuple[CellShare, ...]]:
    """(fleet cap, caps summed over the orchestrators, each share): before any governance round split the team
    (a fleet with no governed orchestrator) its fleet cap is the entitlement rule's."""
    if totals is None:
        return rule_cap, None, ()
    return totals.fleet_cap, totals.caps, totals.shares
