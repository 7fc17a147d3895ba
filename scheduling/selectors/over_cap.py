""""In use" above a team's cap never stands unexplained (issue 31 item 5). The cap is the entitlement rule's:
its burst limit plus its grants in force (``TeamNow.fleet_cap``). The GPUs above it are accounted for, in this
order: work that started before the limit was lowered (a cap stops new work, it does not stop running work);
work on orchestrators where no team cap is enforced (Ray: observed, not enforced; the demo's and disabled ones:
not governed); and what remains, held above the team's share where it runs because that much was already running
when the split was made, which reclaim takes back where others wait for their guarantee."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from scheduling.models import Orchestrator, Queue, Team, Workload

from .teams import TeamNow


def with_notes(rows: list[TeamNow]) -> list[tuple[TeamNow, str]]:
    """Each row with the sentence that explains its in-use above its cap ("" when within it). A fixed number of
    queries however many teams are over: the tree, their running work, their queues' history, the governed
    orchestrators."""
    over = [r for r in rows if r.over_cap]
    if not over:
        return [(r, "") for r in rows]
    facts = _Facts.read([r.slug for r in over])
    notes = {r.slug: _note(r, facts) for r in over}
    return [(r, notes.get(r.slug, "")) for r in rows]


@dataclass(frozen=True)
class _Running:
    team_id: int
    orchestrator: str
    kind: str
    governed: bool
    started_at: datetime | None
    gpus: int


@dataclass(frozen=True)
class _Facts:
    members: dict[str, list[int]]  # team slug -> its subtree's team ids
    ids: dict[str, int]
    running: list[_Running]
    lowered: dict[int, datetime]  # team id -> when its any-model burst limit was last lowered

    @classmethod
    def read(cls, slugs: list[str]) -> _Facts:
        tree = Team.objects.tree()
        ids = {t.slug: t.pk for t in tree.teams.values() if t.slug in slugs}
        members = {slug: tree.subtree(pk) for slug, pk in ids.items()}
        every = {tid for team_ids in members.values() for tid in team_ids}
        governed = set(Orchestrator.objects.governed().filter(enabled=True).values_list("pk", flat=True))
        rows = Workload.objects.filter(state=Workload.State.RUNNING, team_id__in=every).values_list(
            "team_id", "orchestrator_id", "orchestrator__name", "orchestrator__kind", "started_at",
            "gang_size", "gpus_per_member",
        )
        running = [
            _Running(team, name, kind, orch in governed, started, gang * per)
            for team, orch, name, kind, started, gang, per in rows
        ]
        return cls(members, ids, running, _lowered_at(list(ids.values())))


def _note(row: TeamNow, facts: _Facts) -> str:
    members = set(facts.members[row.slug])
    running = [r for r in facts.running if r.team_id in members]
    excess = row.over_cap
    parts: list[str] = []
    lowered = facts.lowered.get(facts.ids[row.slug])
    if excess > 0 and lowered is not None:
        before = sum(r.gpus for r in running if r.started_at is not None and r.started_at < lowered)
        if before:
            parts.append(f"{min(before, excess)} started before the limit was lowered on {lowered:%Y-%m-%d %H:%M} UTC")
            excess -= min(before, excess)
    if excess > 0:
        for name, gpus in sorted(_ungoverned(running).items()):
            if excess <= 0:
                break
            parts.append(f"{min(gpus, excess)} on {name}")
            excess -= min(gpus, excess)
    if excess > 0:
        parts.append(f"{excess} held above its share where they run, only because they were running already; "
                     "reclaim takes them back")
    granted = f" (burst limit {row.queue_burst} + {row.granted} granted)" if row.granted else ""
    cap = f"its cap of {row.fleet_cap}{granted}"
    return f"{row.allocated} in use, {row.over_cap} above {cap}: " + "; ".join(parts)


def _lowered_at(team_ids: list[int]) -> dict[int, datetime]:
    """When each team's any-model burst limit was last lowered (its queue's history, oldest first)."""
    history = (
        Queue.history.filter(team_id__in=team_ids, gpu_model="")
        .order_by("team_id", "history_date", "history_id")
        .values_list("team_id", "burst_limit", "history_date")
    )
    lowered: dict[int, datetime] = {}
    previous: dict[int, int] = {}
    for team_id, limit, at in history:
        if team_id in previous and limit < previous[team_id]:
            lowered[team_id] = at
        previous[team_id] = limit
    return lowered


def _ungoverned(running: list[_Running]) -> dict[str, int]:
    """GPUs per label of orchestrators where no team cap holds: Ray's, and those governance does not reach."""
    found: dict[str, int] = defaultdict(int)
    for r in running:
        if r.kind == Orchestrator.Kind.RAY:
            found[f"Ray {r.orchestrator} (team caps observed, not enforced)"] += r.gpus
        elif not r.governed:
            found[f"{r.orchestrator} (not governed: no team cap written there)"] += r.gpus
    return dict(found)
