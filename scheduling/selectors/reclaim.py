"""The reclaim engine's inputs for one orchestrator (its nodes, running and pending work, the guarantees it must
keep) and reclaim plans as pages and the API read them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, Sum

from scheduling.engine.types import Node as EngineNode
from scheduling.engine.types import Request, RunningWorkload
from scheduling.models import EntitlementShare, Node, Orchestrator, Queue, QuotaGrant, ReclaimPlan, Workload
from scheduling.models.teams import Team
from scheduling.selectors import access
from scheduling.selectors.engine_inputs import engine_node, node_rows, reclaim_request, reclaim_running


@dataclass(frozen=True)
class ReclaimInputs:
    nodes: tuple[EngineNode, ...]
    running: tuple[RunningWorkload, ...]
    pending: tuple[Request, ...]


def guarantees_by_orchestrator(orchestrators: list[Orchestrator], now: datetime) -> dict[int, dict[str, float]]:
    """Per orchestrator pk, each team's guaranteed GPUs there (team slug -> GPUs): its share of its fleet
    guarantee as the last governance round split it (``EntitlementShare``, docs/governance.md "The split"), over
    every GPU model of that orchestrator, less what its sub-teams are guaranteed there (they claim their own).

    An orchestrator no round has split yet (none governed, or before the first round) falls back to the copy
    the portal had before the split: each team's whole fleet guarantee plus its grants in force there. Reclaim
    acts only where a team is below this figure *and* others hold GPUs above theirs on the same orchestrator,
    so that copy over-asks, never steals from a team within its own."""
    split = _split_guarantees(orchestrators)
    copies = _fleet_copies([o for o in orchestrators if o.pk not in split], now)
    return {o.pk: split.get(o.pk) or copies.get(o.pk, {}) for o in orchestrators}


def _split_guarantees(orchestrators: list[Orchestrator]) -> dict[int, dict[str, float]]:
    rows = EntitlementShare.objects.filter(orchestrator__in=orchestrators).values_list(
        "orchestrator_id", "gpu_model", "team__slug", "team__parent__slug", "guarantee"
    )
    cells: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    parents: dict[str, str | None] = {}
    for orchestrator_id, model, slug, parent, guarantee in rows:
        cells[(orchestrator_id, model)][slug] = guarantee
        parents[slug] = parent
    result: dict[int, dict[str, float]] = {}
    for (orchestrator_id, _model), guarantees in cells.items():
        own = dict(guarantees)
        for slug, guarantee in guarantees.items():
            parent = parents[slug]
            if parent in own:
                own[parent] -= guarantee
        here = result.setdefault(orchestrator_id, {})
        for slug, gpus in own.items():
            if gpus > 0:
                here[slug] = here.get(slug, 0.0) + float(gpus)
    return result


def _fleet_copies(orchestrators: list[Orchestrator], now: datetime) -> dict[int, dict[str, float]]:
    fleet = {
        slug: float(gpus or 0)
        for slug, gpus in Queue.objects.values_list("team__slug").annotate(gpus=Sum("guaranteed"))
    }
    grants = QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE, starts_at__lte=now, ends_at__gt=now)
    result: dict[int, dict[str, float]] = {}
    for orchestrator in orchestrators:
        here = dict(fleet)
        mine = grants.filter(Q(orchestrator__isnull=True) | Q(orchestrator=orchestrator))
        for slug, gpus in mine.values_list("team__slug").annotate(gpus=Sum("gpus")):
            here[slug] = here.get(slug, 0.0) + float(gpus or 0)
        result[orchestrator.pk] = {slug: gpus for slug, gpus in here.items() if gpus > 0}
    return result


def reclaim_inputs(orchestrator: Orchestrator) -> ReclaimInputs:
    """What the last collect round saw of ``orchestrator`` as the engine reads it. A workload's GPUs on a node
    keep the indices the scheduler reported, else the node's next free ones, so two workloads never share a
    GPU in the model; work without a team is never a victim (nobody can say whose guarantee it borrows), nor
    work the orchestrator's lever cannot stop (``stop_handle``)."""
    rows = list(
        Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES)
        .select_related("team")
        .only("external_id", "state", "gang_size", "gpus_per_member", "priority", "submitted_at", "started_at",
              "nodes", "submission_id", "team__slug")
        .order_by("started_at", "external_id")
    )
    taken: dict[str, set[int]] = defaultdict(set)
    running = tuple(reclaim_running(row, taken, stop_handle(row, orchestrator.kind))
                    for row in rows if row.state == Workload.State.RUNNING)
    pending = tuple(reclaim_request(row) for row in rows if row.state == Workload.State.PENDING and row.gpus > 0)
    nodes = tuple(
        engine_node(row, allocated=max(row[3], len(taken.get(row[0], ()))))
        for row in node_rows(Node.objects.filter(orchestrator=orchestrator).order_by("name"), qualified=False)
    )
    return ReclaimInputs(nodes, running, pending)


def stop_handle(row: Workload, kind: str) -> str:
    """What the orchestrator's reclaim lever stops ``row`` by, "" when nothing can: the workload itself on Slurm
    (``scontrol requeue``) and Kubernetes (its pod or pod group evicted); on Ray its job's submission id (the Jobs
    API stops the whole job, so every placement group, task and actor of one job is one gang to the engine; a
    driver started by hand has none and is never a victim)."""
    if kind == Orchestrator.Kind.RAY:
        return row.submission_id
    return row.external_id


def open_plans(orchestrator: Orchestrator | None = None):
    plans = ReclaimPlan.objects.filter(state__in=(ReclaimPlan.State.PENDING, ReclaimPlan.State.APPROVED))
    return plans.filter(orchestrator=orchestrator) if orchestrator is not None else plans


# ------------------------------------------------------------------------------------------- the reclaim page

OTHER_TEAM = "another team"


@dataclass(frozen=True)
class VictimRow:
    workload_id: str  # "" when the victim's team is hidden from the reader
    team: str
    gpus: float
    reason: str


@dataclass(frozen=True)
class ClaimRow:
    """One owner's claim in a plan, as the reader may see it: an owner of a team hidden from the reader is named
    "another team", without its request or cause; a victim of a hidden team without its job or reason."""

    owner: str
    owner_visible: bool
    guarantee: float
    held: float
    request_id: str
    request_gpus: float
    waited_since: datetime | None
    waited_s: float  # at the round that planned it
    cause: str
    victims: tuple[VictimRow, ...]
    still_waits: bool | None  # None: not asked (a decided plan); False: the owner's request no longer waits

    @property
    def gpus(self) -> float:
        return sum(victim.gpus for victim in self.victims)


@dataclass(frozen=True)
class PlanRow:
    plan: ReclaimPlan
    claims: tuple[ClaimRow, ...]
    teams: frozenset[str]  # owners and victims' teams, as stored

    @property
    def gpus(self) -> float:
        return sum(claim.gpus for claim in self.claims)

    @property
    def owners(self) -> str:
        return ", ".join(dict.fromkeys(claim.owner for claim in self.claims if claim.owner)) or "—"

    @property
    def stale(self) -> bool:
        """Every owner's request has started or ended since the round: approving would stop nothing."""
        return bool(self.claims) and all(claim.still_waits is False for claim in self.claims)

    @property
    def partly_stale(self) -> bool:
        return not self.stale and any(claim.still_waits is False for claim in self.claims)


@dataclass(frozen=True)
class ReclaimPage:
    pending: tuple[PlanRow, ...]
    past: tuple[PlanRow, ...]


def plan_teams(plan: ReclaimPlan) -> frozenset[str]:
    return _claim_teams(plan.reclaims)


def _claim_teams(reclaims: list[dict]) -> frozenset[str]:
    return frozenset(
        [claim.get("owner", "") for claim in reclaims]
        + [victim.get("team", "") for claim in reclaims for victim in claim.get("victims", ())]
    ) - {""}


def _touches_claims(reclaims: list[dict], visible: frozenset[str]) -> bool:
    return bool(_claim_teams(reclaims or []) & visible)


def reclaim_page(user, past_limit: int = 50) -> ReclaimPage:
    """Pending plans (oldest first, each owner's request checked: does it still wait?) and the latest decided or
    applied ones, narrowed to the plans touching a team ``user`` may see (``access.team_ids_visible_to``); what
    such a plan says of teams the reader may not see is redacted (``ClaimRow``)."""
    ids = access.team_ids_visible_to(user)
    visible = None if ids is None else frozenset(Team.objects.filter(pk__in=ids).values_list("slug", flat=True))
    plans = ReclaimPlan.objects.select_related("orchestrator", "decided_by").defer(
        "orchestrator__options", "orchestrator__breaker_state")
    pending = [p for p in plans.filter(state=ReclaimPlan.State.PENDING).order_by("created_at")
               if _touches(p, visible)]
    waiting = _still_waiting(pending)
    past_plans = [p for p in plans.exclude(state=ReclaimPlan.State.PENDING)[: past_limit * 4] if _touches(p, visible)]
    return ReclaimPage(
        pending=tuple(_plan_row(p, visible, waiting) for p in pending),
        past=tuple(_plan_row(p, visible, None) for p in past_plans[:past_limit]),
    )


def plans_visible_to(user, queryset=None):
    """Reclaim plans touching a team ``user`` may see (all for admins): the API's list follows the page's rule."""
    queryset = ReclaimPlan.objects.all() if queryset is None else queryset
    ids = access.team_ids_visible_to(user)
    if ids is None:
        return queryset
    visible = frozenset(Team.objects.filter(pk__in=ids).values_list("slug", flat=True))
    touching = [pk for pk, reclaims in ReclaimPlan.objects.values_list("pk", "reclaims")
                if _touches_claims(reclaims, visible)]
    return queryset.filter(pk__in=touching)


def visible_plan(user, pk: int) -> ReclaimPlan | None:
    """The plan ``pk`` when ``user`` may see it (it touches one of their teams), else None."""
    plan = ReclaimPlan.objects.select_related("orchestrator").filter(pk=pk).first()
    ids = access.team_ids_visible_to(user)
    if plan is None or ids is None:
        return plan
    visible = frozenset(Team.objects.filter(pk__in=ids).values_list("slug", flat=True))
    return plan if _touches(plan, visible) else None


def _touches(plan: ReclaimPlan, visible: frozenset[str] | None) -> bool:
    return visible is None or bool(plan_teams(plan) & visible)


def _still_waiting(plans: list[ReclaimPlan]) -> set[tuple[int, str]]:
    """(orchestrator pk, external id) of the plans' owner requests that still wait, in one query."""
    wanted = Q(pk__in=[])
    for plan in plans:
        ids = [claim.get("request_id") for claim in plan.reclaims if claim.get("request_id")]
        if ids:
            wanted |= Q(orchestrator_id=plan.orchestrator_id, external_id__in=ids)
    rows = Workload.objects.filter(wanted, state=Workload.State.PENDING).values_list("orchestrator_id", "external_id")
    return set(rows)


def _plan_row(plan: ReclaimPlan, visible: frozenset[str] | None,
              waiting: set[tuple[int, str]] | None) -> PlanRow:
    return PlanRow(plan, tuple(_claim_row(plan, claim, visible, waiting) for claim in plan.reclaims), plan_teams(plan))


def _claim_row(plan: ReclaimPlan, claim: dict, visible: frozenset[str] | None,
               waiting: set[tuple[int, str]] | None) -> ClaimRow:
    owner = claim.get("owner", "")
    shown = visible is None or owner in visible
    waited = float(claim.get("waited_s") or 0)
    request_id = claim.get("request_id", "")
    still = None if waiting is None or not request_id else (plan.orchestrator_id, request_id) in waiting
    return ClaimRow(
        owner=owner if shown else (OTHER_TEAM if owner else ""),
        owner_visible=shown,
        guarantee=float(claim.get("owner_guarantee") or 0) if shown else 0.0,
        held=float(claim.get("owner_held") or 0) if shown else 0.0,
        request_id=request_id if shown else "",
        request_gpus=float(claim.get("request_gpus") or 0) if shown else 0.0,
        waited_since=plan.created_at - timedelta(seconds=waited) if shown and waited else None,
        waited_s=waited if shown else 0.0,
        cause=claim.get("cause", "") if shown else "",
        victims=tuple(_victim_row(victim, visible, shown) for victim in claim.get("victims", ())),
        still_waits=still,
    )


def _victim_row(victim: dict, visible: frozenset[str] | None, owner_shown: bool) -> VictimRow:
    """The engine's reason names the owner it was taken for: a reader who may not see the owner reads a plain one."""
    team = victim.get("team", "")
    if visible is None or team in visible:
        reason = victim.get("reason", "") if owner_shown else f"taken back for {OTHER_TEAM} below its guarantee"
        return VictimRow(str(victim.get("workload_id", "")), team, float(victim.get("gpus") or 0), reason)
    return VictimRow("", OTHER_TEAM, float(victim.get("gpus") or 0), "")


def pending_plan_count() -> int:
    """Reclaim plans waiting for an admin (the governance page links them)."""
    return ReclaimPlan.objects.filter(state=ReclaimPlan.State.PENDING).count()
