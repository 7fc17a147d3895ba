"""Fair-share entitlements: demand per team, the preview of an edit, and the history of queue changes."""

import itertools
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import F, Q, Sum

from scheduling.engine.fairshare import entitlements
from scheduling.engine.types import Entitlement, TeamSpec
from scheduling.models import (
    Queue,
    Team,
    Workload,
)
from scheduling.selectors.fleet import fleet_capacity

# --- fair share -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueValues:
    team_id: int
    gpu_model: str
    weight: float
    guaranteed: int
    burst_limit: int


@dataclass(frozen=True)
class EntitlementRow:
    slug: str
    name: str
    depth: int
    demand: float
    before: float
    after: float
    fair_before: float
    fair_after: float
    reasons: tuple[str, ...]

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def fair_delta(self) -> float:
        return self.fair_after - self.fair_before

    @property
    def delta_text(self) -> str:
        return f"{self.delta:+.1f}"

    @property
    def fair_delta_text(self) -> str:
        return f"{self.fair_delta:+.1f}"


def queues_in_tree_order() -> tuple[list[Queue], dict[int, int], dict[int, Team]]:
    """Every queue in the order the team tree is shown (a team's queues by GPU model), each team's depth, and
    the teams by id (each queue's ``team`` set from them: no query per row)."""
    tree = Team.objects.tree()
    depth = {team.pk: level for team, level in tree.walk()}
    position = {tid: i for i, tid in enumerate(depth)}
    queues = sorted(Queue.objects.all(), key=lambda q: (position.get(q.team_id, 0), q.gpu_model))
    for queue in queues:
        queue.team = tree.teams[queue.team_id]
    return queues, depth, tree.teams


def team_demand() -> tuple[dict[int, float], dict[int, float]]:
    """GPUs each team's own work holds (running) and wants (running + pending) now."""
    rows = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id")
        .annotate(
            running=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.RUNNING)),
            total=Sum(F("gang_size") * F("gpus_per_member")),
        )
        .values_list("team_id", "running", "total")
    )
    held, wanted = {}, {}
    for tid, running, total in rows:
        held[tid], wanted[tid] = float(running or 0), float(total or 0)
    return held, wanted


def entitlement_preview(after: list[QueueValues]) -> list[EntitlementRow]:
    """Entitlements per team (any-model queues) under today's policy and under ``after``, given demand now."""
    tree = Team.objects.tree()
    teams = tree.teams
    before = [
        QueueValues(q.team_id, q.gpu_model, float(q.weight), q.guaranteed, q.burst_limit)
        for q in Queue.objects.filter(gpu_model="")
    ]
    capacity = fleet_capacity()
    held, wanted = team_demand()
    demand = {teams[tid].slug: gpus for tid, gpus in wanted.items() if tid in teams}
    allocation = {teams[tid].slug: gpus for tid, gpus in held.items() if tid in teams}

    def run(values: list[QueueValues]) -> dict[str, Entitlement]:
        by_team = {v.team_id: v for v in values if v.gpu_model == ""}
        specs = [
            TeamSpec(
                name=t.slug,
                parent=tree.parent_slug(t.pk),
                weight=by_team[t.pk].weight if t.pk in by_team else 0.0,
                guaranteed=by_team[t.pk].guaranteed if t.pk in by_team else 0,
                burst_limit=by_team[t.pk].burst_limit if t.pk in by_team else None,
            )
            for t in teams.values()
        ]
        return {e.team: e for e in entitlements(specs, float(capacity), demand, allocation)}

    old, new = run(before), run(after)
    rows: list[EntitlementRow] = []

    for team, depth in tree.walk():
        o, n = old.get(team.slug), new.get(team.slug)
        rows.append(
            EntitlementRow(
                team.slug,
                team.name,
                depth,
                n.demand if n else 0.0,
                o.allocation if o else 0.0,
                n.allocation if n else 0.0,
                o.fair_share if o else 0.0,
                n.fair_share if n else 0.0,
                n.reasons if n else (),
            )
        )
    return rows


def queue_history(limit: int = 100):
    """Entitlement versions, newest first, each with the version before it (for the diff)."""
    history = list(
        Queue.history.select_related("history_user", "team").order_by("-history_date", "-history_id")[:limit]
    )
    ids = {h.id for h in history}
    earlier = defaultdict(list)
    for row in (
        Queue.history.filter(id__in=ids)
        .order_by("history_date", "history_id")
        .values("history_id", "id", "weight", "guaranteed", "burst_limit")
    ):
        earlier[row["id"]].append(row)
    previous: dict[int, dict] = {}
    for rows in earlier.values():
        for before, after in itertools.pairwise(rows):
            previous[after["history_id"]] = before
    return [(h, previous.get(h.history_id)) for h in history]
