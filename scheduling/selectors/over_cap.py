""""In use" above a team's cap never stands unexplained (issue 31 item 5). The cap is the entitlement rule's:
its burst limit plus its grants in force (``TeamNow.fleet_cap``). The GPUs above it are accounted for, in this
order: work that started before the limit was lowered (a cap stops new work, it does not stop running work);
work on orchestrators where no team cap is enforced (Ray: observed, not enforced; the demo's and disabled ones:
not governed); and what remains, held above the team's share where it runs because that much was already running
when the split was made, which reclaim takes back where others wait for their guarantee."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import F, Sum

from scheduling.models import Orchestrator, Queue, Team, Workload

from .teams import TeamNow


def with_notes(rows: list[TeamNow]) -> list[tuple[TeamNow, str]]:
    """Each row with the sentence that explains its in-use above its cap ("" when within it)."""
    over = [r for r in rows if r.over_cap]
    if not over:
        return [(r, "") for r in rows]
    notes = {r.slug: _note(r) for r in over}
    return [(r, notes.get(r.slug, "")) for r in rows]


def _note(row: TeamNow) -> str:
    tree = Team.objects.tree()
    team = next(t for t in tree.teams.values() if t.slug == row.slug)
    members = tree.subtree(team.pk)
    excess = row.over_cap
    parts: list[str] = []
    running = Workload.objects.filter(state=Workload.State.RUNNING, team_id__in=members)
    lowered = _lowered_at(team.pk)
    if excess > 0 and lowered is not None:
        before = _gpus(running.filter(started_at__lt=lowered))
        if before:
            parts.append(f"{min(before, excess)} started before the limit was lowered on {lowered:%Y-%m-%d %H:%M} UTC")
            excess -= min(before, excess)
    if excess > 0:
        ungoverned = _ungoverned(running)
        for name, gpus in sorted(ungoverned.items()):
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


def _gpus(workloads) -> int:
    return workloads.aggregate(g=Sum(F("gang_size") * F("gpus_per_member")))["g"] or 0


def _lowered_at(team_id: int) -> datetime | None:
    """When the team's any-model burst limit was last lowered (its history, oldest first)."""
    queue = Queue.objects.filter(team_id=team_id, gpu_model="").first()
    if queue is None:
        return None
    lowered, previous = None, None
    for limit, at in queue.history.order_by("history_date", "history_id").values_list("burst_limit", "history_date"):
        if previous is not None and limit < previous:
            lowered = at
        previous = limit
    return lowered


def _ungoverned(running) -> dict[str, int]:
    """GPUs per label of orchestrators where no team cap holds: Ray's, and those governance does not reach."""
    governed = set(Orchestrator.objects.governed().filter(enabled=True).values_list("pk", flat=True))
    found: dict[str, int] = defaultdict(int)
    rows = running.values("orchestrator_id", "orchestrator__name", "orchestrator__kind").annotate(
        g=Sum(F("gang_size") * F("gpus_per_member"))
    )
    for row in rows:
        if row["orchestrator__kind"] == Orchestrator.Kind.RAY:
            found[f"Ray {row['orchestrator__name']} (team caps observed, not enforced)"] += row["g"] or 0
        elif row["orchestrator_id"] not in governed:
            found[f"{row['orchestrator__name']} (not governed: no team cap written there)"] += row["g"] or 0
    return dict(found)
