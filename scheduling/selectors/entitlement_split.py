"""The entitlement split as pages show it: a team's share on each orchestrator beside its fleet figures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduling.engine.entitlement_split import RAY_OBSERVED
from scheduling.models import EntitlementShare, Team


@dataclass(frozen=True)
class ShareRow:
    orchestrator: str
    gpu_model: str
    guarantee: int
    cap: int | None
    running: int
    pending: int
    over: int
    enforced: bool
    reason: str


@dataclass(frozen=True)
class TeamSplit:
    """A team's split as of the last round: per orchestrator and GPU model, and summed over the fleet."""

    rows: tuple[ShareRow, ...]
    fleet_guarantee: int
    fleet_cap: int | None
    caps_total: int
    guarantees_total: int
    over_total: int
    computed_at: datetime

    @property
    def observed_only(self) -> str:
        return RAY_OBSERVED


def team_split(team: Team) -> TeamSplit | None:
    """The team's shares from the last governance round (None before any round split the fleet)."""
    shares = list(EntitlementShare.objects.filter(team=team).select_related("orchestrator"))
    if not shares:
        return None
    rows = tuple(
        ShareRow(
            s.orchestrator.name,
            s.gpu_model,
            s.guarantee,
            s.cap,
            s.subtree_running,
            s.subtree_pending,
            s.over,
            s.enforced,
            _why(s),
        )
        for s in sorted(shares, key=lambda s: (s.orchestrator.name, s.gpu_model))
    )
    first = shares[0]
    return TeamSplit(
        rows,
        first.fleet_guarantee,
        first.fleet_cap,
        sum(r.cap or 0 for r in rows),
        sum(r.guarantee for r in rows),
        sum(r.over for r in rows),
        max(s.computed_at for s in shares),
    )


def _why(share: EntitlementShare) -> str:
    if share.cap is None:
        return "no queue for this GPU model: its parent's cap applies"
    if share.over:
        return (
            f"held at {share.cap} by the GPUs running here: {share.over} above its share of the fleet cap; "
            "reclaim takes them back in order"
        )
    return "" if share.enforced else "observed only: Ray has no team quota"


def split_totals(teams: list[Team]) -> dict[int, tuple[int, int | None]]:
    """Per team id: caps summed over the orchestrators, and its fleet cap."""
    totals: dict[int, tuple[int, int | None]] = {}
    for team_id, cap, fleet_cap in EntitlementShare.objects.filter(team__in=teams).values_list(
        "team_id", "cap", "fleet_cap"
    ):
        caps, _ = totals.get(team_id, (0, fleet_cap))
        totals[team_id] = (caps + (cap or 0), fleet_cap)
    return totals
