"""Reclaim: take borrowed GPUs back so a team below its guarantee starts its pending work.

One orchestrator (one GPU-model pool of it) at a time. A pending request is a *claim* when its team
holds less than its guarantee there and the request would keep it within that guarantee. A claim is
acted on only after it has waited ``grace_s`` (the orchestrator's own scheduler, or its native
reclaim, gets the first chance: Volcano's reclaim action, Kueue's ``reclaimWithinCohort``, Slurm's QOS
preemption). Victims are then chosen by the engine's preemption rules (``preemption.select_victims``:
borrowed capacity only, a victim's team never pushed below its own guarantee, whole gangs, lowest
priority then least work lost, nothing younger than ``min_runtime_s`` as KAI's min-runtime), here with
``borrowers_only`` so the owner's own work is never a victim.

Bounds that make a reclaim safe to automate:

* a team at or below its guarantee is never a victim (the preemption ledger keeps every victim's team at
  or above its floor after the plan);
* an owner never takes more GPUs from borrowers than its pending demand that fits within its guarantee
  (``budget``): the victim search is bounded by what is left of it (``select_victims(max_gpus=...)``), so it
  looks past a cheaper gang too big for the budget to smaller ones; a claim no victim set within the budget
  serves is passed over, with why;
* claims are served oldest first, and each accepted plan is applied to the in-memory model before the
  next claim is examined, so two claims never count the same freed GPUs.

The result is a decision with an explanation per reclaim, per victim and per claim passed over;
stopping real work is the actuators' job (``collectors/reclaim_actuators.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import RunningSet, apply_victim_plan, select_victims
from scheduling.engine.types import Entitlement, Node, Placement, Request, RunningWorkload, Victim, VictimPlan
from scheduling.wording import plural

EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class ReclaimPolicy:
    """``min_runtime_s``: a victim has run at least this long (KAI's min-runtime); ``grace_s``: a claim
    has waited at least this long before the portal acts on it."""

    min_runtime_s: float = 600.0
    grace_s: float = 300.0

    def __post_init__(self) -> None:
        if self.min_runtime_s < 0:
            raise ValueError(f"min_runtime_s must be >= 0, got {self.min_runtime_s}")
        if self.grace_s < 0:
            raise ValueError(f"grace_s must be >= 0, got {self.grace_s}")


@dataclass(frozen=True, slots=True)
class Reclaim:
    """One claim served: the owner's request starts where ``victims`` (other teams' borrowed GPUs) stop."""

    owner: str
    owner_guarantee: float
    owner_held: float
    request_id: str
    request_gpus: float
    waited_s: float
    victims: tuple[Victim, ...]
    placement: Placement
    reasons: tuple[str, ...]

    @property
    def gpus(self) -> float:
        return sum(victim.gpus for victim in self.victims)

    @property
    def cause(self) -> str:
        """The cause an audit entry records: the owner, its guarantee and what waited."""
        return (
            f"{self.owner} held {self.owner_held:g} of its {self.owner_guarantee:g} guaranteed GPUs; "
            f"{self.request_id} ({self.request_gpus:g} GPUs) waited {self.waited_s:.0f}s"
        )


@dataclass(frozen=True, slots=True)
class PassedClaim:
    """A pending request of a team below its guarantee that this round does not reclaim for, and why."""

    owner: str
    request_id: str
    why: str


@dataclass(frozen=True, slots=True)
class ReclaimDecision:
    reclaims: tuple[Reclaim, ...]
    passed: tuple[PassedClaim, ...]

    @property
    def victims(self) -> tuple[Victim, ...]:
        return tuple(victim for reclaim in self.reclaims for victim in reclaim.victims)


def plan_reclaims(
    nodes: Sequence[Node] | ClusterState,
    running: Sequence[RunningWorkload],
    pending: Sequence[Request],
    guarantees: Mapping[str, float],
    *,
    now: float,
    policy: ReclaimPolicy,
) -> ReclaimDecision:
    """Which borrowers' gangs to stop so teams below their guarantee start their pending work (module doc).

    ``guarantees`` maps a team to its guaranteed GPUs on this orchestrator (a team absent holds no
    guarantee here: all it runs is borrowed). ``nodes`` must already account for ``running``.
    """
    state = nodes.copy() if isinstance(nodes, ClusterState) else ClusterState(nodes)
    index = RunningSet(running)
    entitlements = {team: _floor(team, gpus) for team, gpus in guarantees.items()}
    held = index.gpus_by_team()
    budget = _reclaim_budgets(pending, guarantees, held)
    taken: dict[str, float] = {}
    reclaims: list[Reclaim] = []
    passed: list[PassedClaim] = []
    for request in sorted(_claims(pending, guarantees), key=lambda r: (r.submitted_at, -r.priority, r.id)):
        guarantee = guarantees[request.team]
        holds = index.gpus_by_team().get(request.team, 0.0)
        waited = now - request.submitted_at
        refusal = _refusal(request, guarantee, holds, waited, policy)
        if refusal:
            passed.append(PassedClaim(request.team, request.id, refusal))
            continue
        left = budget.get(request.team, 0.0) - taken.get(request.team, 0.0)
        result = select_victims(state, index, request, entitlements, now=now,
                                min_runtime_s=policy.min_runtime_s, borrowers_only=True, max_gpus=left)
        if not isinstance(result, VictimPlan):
            passed.append(PassedClaim(request.team, request.id, result.message))
            continue
        gpus = sum(victim.gpus for victim in result.victims)
        if gpus > left + EPSILON:
            passed.append(PassedClaim(request.team, request.id,
                                      f"its cheapest victims hold {gpus:g} GPUs, more than the {left:g} GPUs of "
                                      f"pending demand within its guarantee left to reclaim for"))
            continue
        apply_victim_plan(state, index, result, request, now=now)
        if not result.victims:
            passed.append(PassedClaim(request.team, request.id,
                                      "fits in free GPUs now: the orchestrator's own scheduler starts it"))
            continue
        taken[request.team] = taken.get(request.team, 0.0) + gpus
        reclaims.append(_reclaim(request, guarantee, holds, waited, result))
    return ReclaimDecision(tuple(reclaims), tuple(passed))


def _floor(team: str, gpus: float) -> Entitlement:
    """The guarantee as the preemption ledger reads it: floor and entitlement both equal to it."""
    return Entitlement(team, guaranteed=gpus, fair_share=gpus, limit=gpus, demand=0.0, allocation=gpus)


def _claims(pending: Sequence[Request], guarantees: Mapping[str, float]) -> list[Request]:
    return [request for request in pending if guarantees.get(request.team, 0.0) > 0 and request.gpus > 0]


def _reclaim_budgets(
    pending: Sequence[Request], guarantees: Mapping[str, float], held: Mapping[str, float]
) -> dict[str, float]:
    """Per owner, the GPUs it may take back this round: its pending demand that fits within its guarantee,
    never more than what it lacks of that guarantee."""
    deficit = {team: max(0.0, gpus - held.get(team, 0.0)) for team, gpus in guarantees.items()}
    demand: dict[str, float] = {}
    for request in _claims(pending, guarantees):
        if request.gpus <= deficit[request.team] + EPSILON:
            demand[request.team] = demand.get(request.team, 0.0) + request.gpus
    return {team: min(gpus, deficit[team]) for team, gpus in demand.items()}


def _refusal(request: Request, guarantee: float, holds: float, waited: float, policy: ReclaimPolicy) -> str:
    if holds + request.gpus > guarantee + EPSILON:
        return (f"{request.team} holds {holds:g} GPUs here; {request.gpus:g} more would exceed its guarantee "
                f"of {guarantee:g} (beyond a guarantee the queue's fair share decides, not reclaim)")
    if waited < policy.grace_s:
        return f"waited {waited:.0f}s of the {policy.grace_s:.0f}s grace before borrowed GPUs are reclaimed"
    return ""


def _reclaim(request: Request, guarantee: float, holds: float, waited: float, plan: VictimPlan) -> Reclaim:
    lenders = sorted({victim.team for victim in plan.victims})
    gpus = sum(victim.gpus for victim in plan.victims)
    why = (
        f"{request.team} holds {holds:g} of its {guarantee:g} guaranteed GPUs and {request.id} "
        f"({request.gpus:g} GPUs) waited {waited:.0f}s",
        f"takes back {gpus:g} borrowed GPUs from {', '.join(lenders)} "
        f"({plural(len({victim.gang_id for victim in plan.victims}), 'gang')})",
        *plan.reasons,
    )
    return Reclaim(request.team, guarantee, holds, request.id, float(request.gpus), waited, plan.victims,
                   plan.placement, why)


# ------------------------------------------------------------------------------------- a pool's ceiling


@dataclass(frozen=True, slots=True)
class Holding:
    """One job's GPUs on a pool with no per-team quota (Ray): its owner, when it started, whether it can be
    stopped (a Ray driver started by hand has no submission id the Jobs API could stop)."""

    id: str
    team: str
    gpus: float
    started_at: float
    stoppable: bool = True


@dataclass(frozen=True, slots=True)
class CeilingDecision:
    ceiling: float
    held: float
    stops: tuple[Victim, ...]
    reasons: tuple[str, ...]

    @property
    def held_after(self) -> float:
        return self.held - sum(stop.gpus for stop in self.stops)

    @property
    def exceeded(self) -> bool:
        return self.held > self.ceiling + EPSILON


def plan_ceiling(
    holdings: Sequence[Holding],
    ceiling: float,
    guarantees: Mapping[str, float],
    *,
    now: float,
    min_runtime_s: float,
) -> CeilingDecision:
    """Which whole jobs to stop so a pool holds at most ``ceiling`` GPUs: borrowed ones only (a job's team keeps
    at least its guarantee), never one inside its minimum runtime, newest first (least work lost), and none
    once the pool is back under its ceiling. When that is not enough, the decision says why."""
    held = sum(h.gpus for h in holdings)
    if held <= ceiling + EPSILON:
        return CeilingDecision(ceiling, held, (), (f"holds {held:g} of its {ceiling:g}-GPU ceiling",))
    by_team: dict[str, float] = {}
    for holding in holdings:
        by_team[holding.team] = by_team.get(holding.team, 0.0) + holding.gpus
    stops: list[Victim] = []
    over = held - ceiling
    for job in sorted(holdings, key=lambda h: (-h.started_at, -h.gpus, h.id)):
        if over <= EPSILON:
            break
        floor = guarantees.get(job.team, 0.0)
        if not job.stoppable or job.gpus <= 0 or now - job.started_at < min_runtime_s:
            continue
        if by_team[job.team] - job.gpus < floor - EPSILON:
            continue
        by_team[job.team] -= job.gpus
        over -= job.gpus
        lost = job.gpus * max(0.0, now - job.started_at)
        reason = (f"the pool holds {held:g} GPUs over its {ceiling:g}-GPU ceiling; team {job.team or '(none)'} "
                  f"borrows above its guarantee of {floor:g}; ran {now - job.started_at:.0f}s ({lost:.0f} GPU-s lost)")
        stops.append(Victim(job.id, job.team, job.gpus, 0, job.id, lost, reason))
    reasons = [f"holds {held:g} GPUs, ceiling {ceiling:g}: stops {plural(len(stops), 'borrowed job')}"]
    if over > EPSILON:
        reasons.append(f"still {over:g} GPUs over: the rest is within guarantees, inside its minimum runtime "
                       f"or cannot be stopped")
    return CeilingDecision(ceiling, held, tuple(stops), tuple(reasons))
