"""The entitlement split as pages show it: a team's share on each orchestrator beside its fleet figures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduling.engine.entitlement_split import RAY_OBSERVED
from scheduling.models import EntitlementShare, Team
from scheduling.models.fleet import DEMO_PREFIX


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
    simulated: bool = False  # the demo's simulated orchestrators: the split is what they hold, nothing written


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
        all(s.orchestrator.endpoint.startswith(DEMO_PREFIX) for s in shares),
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


@dataclass(frozen=True)
class CellShare:
    """One team's share on one (orchestrator, GPU model), as the quota page lists it beside the fleet cap."""

    orchestrator: str
    gpu_model: str
    guarantee: int
    cap: int | None

    def __str__(self) -> str:
        cap = "no cap of its own" if self.cap is None else f"cap {self.cap}"
        return f"{self.orchestrator} {self.gpu_model or 'any model'}: guarantee {self.guarantee}, {cap}"


@dataclass(frozen=True)
class SplitTotals:
    caps: int  # caps summed over the orchestrators
    fleet_cap: int | None
    shares: tuple[CellShare, ...]


def split_totals(teams: list[Team]) -> dict[int, SplitTotals]:
    """Per team id: caps summed over the orchestrators, its fleet cap and each share (one read)."""
    found: dict[int, tuple[int, int | None, list[CellShare]]] = {}
    rows = (
        EntitlementShare.objects.filter(team__in=teams)
        .order_by("orchestrator__name", "gpu_model")
        .values_list("team_id", "cap", "fleet_cap", "orchestrator__name", "gpu_model", "guarantee")
    )
    for team_id, cap, fleet_cap, orchestrator, model, guarantee in rows:
        caps, _, shares = found.get(team_id, (0, fleet_cap, []))
        shares.append(CellShare(orchestrator, model, guarantee, cap))
        found[team_id] = (caps + (cap or 0), fleet_cap, shares)
    return {team_id: SplitTotals(caps, fleet, tuple(shares)) for team_id, (caps, fleet, shares) in found.items()}
