"""Governance as an operator watches it (the REST API's /governance/ and /metrics): the last rounds and whether
they failed, the round in progress, drift findings and plans waiting for an admin and how long they have waited,
and guarantees not kept (a team below its guarantee while it has work waiting). docs/operations.md lists the
alert rules built on these."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Sum

from scheduling.models import (
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    Queue,
    Team,
    TeamTree,
    Workload,
)

from .enforcement import latest_outcomes


@dataclass(frozen=True)
class Waiting:
    """Items of one kind waiting for an admin on one orchestrator: how many, and the oldest's age."""

    orchestrator: str
    count: int
    oldest_s: float


@dataclass(frozen=True)
class GuaranteeGap:
    """A team's guarantee (all GPU models) against what its subtree holds and awaits now. ``unmet``: GPUs of
    the guarantee it wants (pending) and does not hold; above 0 for longer than the grace, the guarantee is
    broken (someone borrowed them, or they are down or fragmented)."""

    team: str
    guaranteed: int
    held: int
    pending: int

    @property
    def unmet(self) -> int:
        return max(0, min(self.guaranteed - self.held, self.pending))


@dataclass(frozen=True)
class RoundsStatus:
    last_finished: EnforcementRun | None
    in_progress: EnforcementRun | None
    outcomes: list[EnforcementOutcome]  # each governed orchestrator's latest


def rounds_status() -> RoundsStatus:
    runs = EnforcementRun.objects.filter(dry_run=False)
    outcomes = sorted(latest_outcomes().values(), key=lambda o: o.orchestrator.name)
    return RoundsStatus(
        last_finished=runs.filter(finished_at__isnull=False).order_by("-finished_at").first(),
        in_progress=runs.filter(finished_at__isnull=True).order_by("-started_at").first(),
        outcomes=outcomes,
    )


def _waiting(rows, stamp: str, now: datetime) -> list[Waiting]:
    oldest: dict[str, datetime] = {}
    counts: dict[str, int] = defaultdict(int)
    for name, at in rows.values_list("orchestrator__name", stamp):
        counts[name] += 1
        oldest[name] = min(at, oldest.get(name, at))
    return [Waiting(name, counts[name], (now - oldest[name]).total_seconds()) for name in sorted(counts)]


def open_drift(now: datetime) -> list[Waiting]:
    """Open drift findings per orchestrator (only those with any)."""
    return _waiting(DriftFinding.objects.filter(state=DriftFinding.State.OPEN), "found_at", now)


def pending_plans(now: datetime) -> list[Waiting]:
    """Review-mode plans nobody decided yet, per orchestrator."""
    return _waiting(EnforcementPlan.objects.filter(state=EnforcementPlan.State.PENDING), "created_at", now)


def guarantee_gaps() -> list[GuaranteeGap]:
    """Per team with a guarantee: its subtree's running and pending GPUs on every orchestrator. Three queries."""
    tree = TeamTree.of(Team.objects.only("pk", "slug", "parent_id"))
    guaranteed: dict[int, int] = defaultdict(int)
    for team_id, gpus in Queue.objects.filter(guaranteed__gt=0).values_list("team_id", "guaranteed"):
        guaranteed[team_id] += gpus
    held: dict[tuple[int, str], int] = defaultdict(int)
    rows = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id", "state")
        .annotate(gpus=Sum(F("gang_size") * F("gpus_per_member")))
    )
    for row in rows:
        held[(row["team_id"], row["state"])] += row["gpus"] or 0
    gaps = []
    for team_id, gpus in guaranteed.items():
        members = tree.subtree(team_id)
        running = sum(held[(t, Workload.State.RUNNING)] for t in members)
        pending = sum(held[(t, Workload.State.PENDING)] for t in members)
        gaps.append(GuaranteeGap(tree.teams[team_id].slug, gpus, running, pending))
    return sorted(gaps, key=lambda g: g.team)
