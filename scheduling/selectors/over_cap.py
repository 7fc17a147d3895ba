""""In use" above a team's burst limit never stands unexplained (issue 31 item 5). The GPUs above the limit are
accounted for, in this order: live quota grants (they raise the cap); work that started before the limit was
lowered (a cap stops new work, it does not stop running work); work on orchestrators where no team cap is
enforced (Ray: observed, not enforced; the demo's and disabled ones: not governed); and what remains, held under
each orchestrator's own cap (until the entitlement split, the limit is written whole to every orchestrator)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import F, Sum
from django.utils import timezone

from scheduling.models import Orchestrator, Queue, QuotaGrant, Team, Workload

from .teams import TeamNow


def with_notes(rows: list[TeamNow], now: datetime | None = None) -> list[tuple[TeamNow, str]]:
    """Each row with the sentence that explains its in-use above its burst limit ("" when within it)."""
    over = [r for r in rows if r.burst_limit and r.allocated > r.burst_limit]
    if not over:
        return [(r, "") for r in rows]
    now = now or timezone.now()
    notes = {r.slug: _note(r, now) for r in over}
    return [(r, notes.get(r.slug, "")) for r in rows]


def _note(row: TeamNow, now: datetime) -> str:
    tree = Team.objects.tree()
    team = next(t for t in tree.teams.values() if t.slug == row.slug)
    members = tree.subtree(team.pk)
    excess = row.allocated - row.burst_limit
    parts: list[str] = []
    granted = _granted(members, now)
    if granted:
        parts.append(f"{min(granted, excess)} granted (live quota grants raise the cap)")
        excess -= min(granted, excess)
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
        parts.append(f"{excess} under each orchestrator's own cap (the limit is written whole to every orchestrator)")
    above = row.allocated - row.burst_limit
    return f"{row.allocated} in use, {above} above the burst limit of {row.burst_limit}: " + "; ".join(parts)


def _gpus(workloads) -> int:
    return workloads.aggregate(g=Sum(F("gang_size") * F("gpus_per_member")))["g"] or 0


def _granted(team_ids: list[int], now: datetime) -> int:
    live = QuotaGrant.objects.filter(
        team_id__in=team_ids, state=QuotaGrant.State.ACTIVE, starts_at__lte=now, ends_at__gt=now
    )
    return live.aggregate(g=Sum("gpus"))["g"] or 0


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
