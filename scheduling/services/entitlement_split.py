"""The entitlement split of each governance round: supply and demand from the last collect round, the previous
split from its rows, the engine's split (``engine.entitlement_split``), and the rows of the new one, each move
audited with why (docs/governance.md, "The split")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import F, Sum
from simple_history.utils import bulk_create_with_history, bulk_update_with_history

from scheduling.engine.entitlement_split import Demand, Split, SplitShare, Supply, split_entitlements
from scheduling.engine.governance_state import GovernanceInput
from scheduling.engine.types import OrchestratorKind
from scheduling.models import EntitlementShare, Node, Orchestrator, Team, Workload
from scheduling.services import orchestrators as orchestrator_access

_FIGURES = (
    "guarantee",
    "cap",
    "running",
    "pending",
    "subtree_running",
    "subtree_pending",
    "over",
    "fleet_guarantee",
    "fleet_cap",
    "enforced",
)


def model_of(orchestrator: Orchestrator) -> str:
    """The GPU model governance maps the orchestrator's pool to (``options.governance.gpu_model``, "" = any)."""
    return str(orchestrator_access.governance_options(orchestrator).get("gpu_model", ""))


def supply_of(orchestrators: Sequence[Orchestrator], *, by_node_model: bool = False) -> list[Supply]:
    """Each orchestrator's pool as one cell: its GPUs (every node it owns) under its governance GPU model; with
    ``by_node_model``, one cell per GPU model its nodes carry (the demo's simulated clusters, where nothing
    written has to name a single model per cluster)."""
    if by_node_model:
        return _supply_by_node_model(orchestrators)
    gpus = dict(
        Node.objects.filter(orchestrator__in=orchestrators)
        .values("orchestrator_id")
        .annotate(total=Sum("gpu_total"))
        .values_list("orchestrator_id", "total")
    )
    return [Supply(o.name, OrchestratorKind(o.kind), model_of(o), int(gpus.get(o.pk) or 0)) for o in orchestrators]


def _supply_by_node_model(orchestrators: Sequence[Orchestrator]) -> list[Supply]:
    by_pk = {o.pk: o for o in orchestrators}
    rows = (
        Node.objects.filter(orchestrator__in=orchestrators)
        .values("orchestrator_id", "gpu_model")
        .annotate(total=Sum("gpu_total"))
        .order_by("orchestrator_id", "gpu_model")
    )
    return [
        Supply(by_pk[r["orchestrator_id"]].name, OrchestratorKind(by_pk[r["orchestrator_id"]].kind), r["gpu_model"],
               int(r["total"] or 0))
        for r in rows
    ]


def demand_of(orchestrators: Sequence[Orchestrator], *, by_node_model: bool = False) -> list[Demand]:
    """Each team's running and pending GPUs per orchestrator, as the last collect round left its workloads
    (``by_node_model``: per GPU model of the nodes, see :func:`_demand_by_node_model`)."""
    if by_node_model:
        return _demand_by_node_model(orchestrators)
    names = {o.pk: (o.name, model_of(o)) for o in orchestrators}
    rows = (
        Workload.objects.filter(orchestrator__in=orchestrators, state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team__slug", "orchestrator_id", "state")
        .annotate(gpus=Sum(F("gang_size") * F("gpus_per_member")))
    )
    totals: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        figures = totals.setdefault((row["team__slug"], row["orchestrator_id"]), [0, 0])
        figures[0 if row["state"] == Workload.State.RUNNING else 1] += int(row["gpus"] or 0)
    return [Demand(team, *names[orch], running, pending) for (team, orch), (running, pending) in totals.items()]


def _demand_by_node_model(orchestrators: Sequence[Orchestrator]) -> list[Demand]:
    """Running GPUs under the model of the nodes they run on; pending work names no model, so it waits on the
    orchestrator's largest pool of one model (where a scheduler with no preference would most likely put it)."""
    names = {o.pk: o.name for o in orchestrators}
    model_of_node = dict(Node.objects.filter(orchestrator__in=orchestrators).values_list("name", "gpu_model"))
    largest = {s.orchestrator: s.gpu_model for s in sorted(_supply_by_node_model(orchestrators), key=lambda s: s.gpus)}
    rows = Workload.objects.filter(
        orchestrator__in=orchestrators, state__in=Workload.ACTIVE_STATES, team__isnull=False
    ).values_list("team__slug", "orchestrator_id", "state", "gang_size", "gpus_per_member", "nodes")
    totals: dict[tuple[str, str, str], list[int]] = {}
    for team, orchestrator_id, state, gang, per, nodes in rows:
        orchestrator = names[orchestrator_id]
        if state == Workload.State.RUNNING:
            for part in nodes or ():
                model = model_of_node.get(str(part.get("node", "")), largest.get(orchestrator, ""))
                totals.setdefault((team, orchestrator, model), [0, 0])[0] += len(part.get("gpus") or ())
        else:
            totals.setdefault((team, orchestrator, largest.get(orchestrator, "")), [0, 0])[1] += gang * per
    return [Demand(team, orch, model, running, pending) for (team, orch, model), (running, pending) in totals.items()]


def namespace_demand(orchestrator: Orchestrator) -> dict[str, tuple[int, int]]:
    """Kubernetes: GPUs running and pending per namespace (a pod group's id is ``<namespace>/<name>``)."""
    demand: dict[str, tuple[int, int]] = {}
    rows = Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES).values_list(
        "external_id", "state", "gang_size", "gpus_per_member"
    )
    for external_id, state, gang, per in rows:
        namespace = external_id.split("/", 1)[0]
        running, pending = demand.get(namespace, (0, 0))
        if state == Workload.State.RUNNING:
            demand[namespace] = (running + gang * per, pending)
        else:
            demand[namespace] = (running, pending + gang * per)
    return demand


def previous_split(orchestrators: Sequence[Orchestrator]) -> Split | None:
    """The last round's split, from its rows (None before the first)."""
    rows = EntitlementShare.objects.filter(orchestrator__in=orchestrators).values_list(
        "team__slug", "orchestrator__name", "gpu_model", *_FIGURES
    )
    shares = tuple(SplitShare(*row[:3], **dict(zip(_FIGURES, row[3:], strict=True))) for row in rows)
    return Split(shares) if shares else None


def round_split(
    data: GovernanceInput,
    orchestrators: Sequence[Orchestrator],
    at: datetime,
    *,
    record: bool,
    by_node_model: bool = False,
) -> Split:
    """This round's split over ``orchestrators``; with ``record``, its rows are saved (moves audited).
    ``by_node_model``: a cell per GPU model of each orchestrator's nodes (the demo), not its governance model."""
    split = split_entitlements(
        data,
        at.timestamp(),
        supply_of(orchestrators, by_node_model=by_node_model),
        demand_of(orchestrators, by_node_model=by_node_model),
        previous_split(orchestrators),
    )
    if record:
        record_split(split, orchestrators, at)
    return split


def _moved(row: EntitlementShare, share: SplitShare) -> str:
    """Why a share moved, for its history row ("" when its guarantee and cap stayed)."""
    if (row.guarantee, row.cap) == (share.guarantee, share.cap):
        return ""
    before = f"guarantee {row.guarantee}, cap {row.cap}"
    was = f"{row.subtree_running} running + {row.subtree_pending} pending"
    now = f"{share.subtree_running} running + {share.subtree_pending} pending"
    return f"{before} -> guarantee {share.guarantee}, cap {share.cap}: here {was} -> {now}; " + "; ".join(
        share.reasons
    )


@transaction.atomic
def record_split(split: Split, orchestrators: Sequence[Orchestrator], at: datetime) -> int:
    """Save ``split`` as the current rows: new ones created, moved ones updated with a history row saying why,
    demand-only changes updated without one. Returns how many guarantees or caps moved."""
    teams = dict(Team.objects.values_list("slug", "pk"))
    orchs = {o.name: o.pk for o in orchestrators}
    existing = {
        (r.team_id, r.orchestrator_id, r.gpu_model): r
        for r in EntitlementShare.objects.select_for_update().filter(orchestrator__in=orchestrators)
    }
    new, moved, quiet = [], [], []
    for share in split.shares:
        key = (teams.get(share.team), orchs.get(share.orchestrator), share.gpu_model)
        if key[0] is None or key[1] is None:
            continue
        row = existing.get(key)  # type: ignore[arg-type]
        if row is None:
            row = EntitlementShare(team_id=key[0], orchestrator_id=key[1], gpu_model=share.gpu_model)
            _fill(row, share, at, "first split: " + "; ".join(share.reasons))
            new.append(row)
            continue
        reason = _moved(row, share)
        if reason:
            _fill(row, share, at, reason)
            moved.append(row)
        elif any(getattr(row, f) != getattr(share, f) for f in _FIGURES):
            _fill(row, share, at, row.reason)
            quiet.append(row)
    fields = [*_FIGURES, "computed_at", "reason"]
    if new:
        bulk_create_with_history(new, EntitlementShare, default_change_reason="first split")
    if moved:
        bulk_update_with_history(moved, EntitlementShare, fields, default_change_reason="share moved")
    if quiet:
        EntitlementShare.objects.bulk_update(quiet, fields)
    return len(moved)


def _fill(row: EntitlementShare, share: SplitShare, at: datetime, reason: str) -> None:
    for name in _FIGURES:
        setattr(row, name, getattr(share, name))
    row.computed_at = at
    row.reason = reason[:4000]
