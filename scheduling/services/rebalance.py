"""Rebalance plans: propose from the last snapshots, decide (audited), apply step by step, safely.

Lifecycle: ``propose_plan`` stores a plan (``proposed``, or ``approved`` when every orchestrator it
touches has ``options.rebalance.auto_apply``); an admin approves or rejects it with a reason; then
``apply_step`` (run by the ``apply_plan_step`` task until it says it is finished) walks each NodeMove:

    pending  --release in the source-->  draining  --empty: take in the target, owner changed-->  moved
       (Slurm drain / Kubernetes cordon+taint / Ray max bound lowered / demo: state DRAINING)
                                             (Slurm resume / Kubernetes label+untaint+uncordon / Ray bound raised)

and marks the plan ``applied`` once every move is verified (read back from the orchestrators; the demo
checks that its next round has seen the node under its new owner). Everything a step needs is in the
database, every verb is idempotent, and a step is one transaction: a worker killed mid-step leaves the
previous state, and the next step repeats the verbs harmlessly. A failing step, or a drain that outlives
``drain_timeout_s``, rolls the node back to its source (undo the take, undo the release) and fails the
plan with the reason; nothing stays owned by two orchestrators.

While a move waits in ``draining`` its row is not saved, so ``NodeMove.updated_at`` is when the drain
started (the timeout's reference). Each completed step stamps ``RebalancePlan.heartbeat_at``;
``propose_rebalance`` re-queues a plan whose step chain was lost, and the reaper (``reap_stale``) fails
an applying plan with no step completed for ``GPUPORTAL_REAPER["plan_after_s"]`` (its steps keep dying),
rolling its nodes back like any failed step.

Per orchestrator, ``options["rebalance"]`` (read by ``services/orchestrators.py``) may hold ``dry_run``
(default true; false for ``demo://``, whose "orchestrator" is this database), ``auto_apply`` (default
false), ``preempt_gangs`` (may a drain break a multi-node gang there; default false),
``target_utilization_fraction`` (default 0.8), ``ray_node_type`` and ``autoscaler_config`` (Ray),
``slurm_conf`` (Slurm, for scontrol). The verbs themselves are ``collectors/verbs.py``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduling.collectors import CollectorError
from scheduling.collectors.verbs import OrchestratorVerbs
from scheduling.engine.calendar import describe_moment
from scheduling.engine.rebalance import RebalanceDecision, drain_costs, plan_rebalance
from scheduling.limits import COMMENT_MAX_CHARS
from scheduling.models import Node as NodeRow
from scheduling.models import NodeMove, Orchestrator, RebalancePlan
from scheduling.selectors.fleet import owned_node_count
from scheduling.selectors.nodes import nodes_by_key
from scheduling.selectors.pool_policies import bounds_now, local_moment
from scheduling.selectors.rebalance import (
    OPEN_STATES,
    demand_now,
    engine_config,
    held_seconds,
    nodes_now,
    rebalance_settings,
    running_now,
    scheduler_orchestrators,
)
from scheduling.wording import plural

from . import notifications, versions
from .audit import require_reason, save_audited
from .orchestrators import masked, rebalance_options, verbs_for_kind

log = logging.getLogger(__name__)


def dry_run_for(orchestrator: Orchestrator) -> bool:
    dry_run = rebalance_options(orchestrator).dry_run
    return not orchestrator.is_demo if dry_run is None else dry_run


def auto_apply_for(orchestrator: Orchestrator) -> bool:
    return rebalance_options(orchestrator).auto_apply


def decide_now(now: datetime | None = None) -> RebalanceDecision:
    """The engine's decision for this moment (nothing stored): what the page shows as "target now".
    Machines move only between orchestrators of one hardware domain (``Orchestrator.node_domain``): the
    engine decides for each domain's pool on its own, and the decisions are put side by side."""
    now = now or timezone.now()
    by_domain: dict[str, list[Orchestrator]] = defaultdict(list)
    for orchestrator in sorted(scheduler_orchestrators(), key=lambda o: (o.node_domain, o.pk)):
        by_domain[orchestrator.node_domain].append(orchestrator)
    bounds = bounds_now(now, float(rebalance_settings()["floor_lead_s"]))
    held = held_seconds(now)
    decisions = [_decide_in_domain(orchestrators, now, bounds, held) for orchestrators in by_domain.values()]
    if len(decisions) == 1:
        return decisions[0]
    return RebalanceDecision(*(tuple(item for d in decisions for item in getattr(d, part)) for part in DECISION_PARTS))


DECISION_PARTS = ("targets", "moves", "effects", "advice", "reasons")


def _decide_in_domain(orchestrators: list[Orchestrator], now: datetime, bounds, held) -> RebalanceDecision:
    """The engine over one domain's orchestrators, their nodes, work, pool rules and hold clocks only (a floor
    of another domain's pool is no reason to move a machine here)."""
    options = {o.pk: rebalance_options(o) for o in orchestrators}
    names = {o.name for o in orchestrators}
    return plan_rebalance(
        nodes_now(orchestrators),
        running_now(orchestrators, {pk: o.preempt_gangs for pk, o in options.items()}),
        demand_now(orchestrators, now, {pk: o.target_utilization_fraction for pk, o in options.items()}),
        {name: rule for name, rule in bounds.items() if name in names},
        now.timestamp(),
        engine_config(),
        {name: seconds for name, seconds in held.items() if name in names},
    )


# ------------------------------------------------------------------------------------------ propose


@dataclass(frozen=True)
class Proposal:
    plan: RebalancePlan | None
    decision: RebalanceDecision | None
    skipped: str = ""


def _effect_document(decision: RebalanceDecision, now: datetime, held: dict[str, int] | None = None) -> dict:
    return {
        "at": now.isoformat(),
        # GPUs each moved node held when proposed: approval compares them with the latest round (recheck_plan)
        "held_gpus": held or {},
        "local_time": describe_moment(*local_moment(now)),
        "targets": [asdict(t) for t in decision.targets],
        "effects": [asdict(e) for e in decision.effects],
        "advice": [asdict(a) for a in decision.advice],
        "reasons": list(decision.reasons),
    }


def propose_plan(now: datetime | None = None) -> Proposal:
    """Store a plan when the engine wants nodes moved and no other plan is open (one at a time)."""
    now = now or timezone.now()
    with transaction.atomic():
        orchestrators = list(
            Orchestrator.objects.select_for_update()
            .filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS)
            .order_by("pk")
        )
        open_plan = RebalancePlan.objects.filter(state__in=OPEN_STATES).first()
        if open_plan is not None:
            return Proposal(None, None, f"{open_plan} is still open")
        decision = decide_now(now)
        if not decision.moves:
            return Proposal(None, decision, "no node needs to move")
        by_name = {o.name: o for o in orchestrators}
        involved = {by_name[m.source] for m in decision.moves} | {by_name[m.target] for m in decision.moves}
        auto = all(auto_apply_for(o) for o in involved)
        plan = RebalancePlan(
            dry_run=any(dry_run_for(o) for o in involved),
            reason=_plan_reason(decision),
            expected_effect=_effect_document(decision, now, held_gpus([m.node for m in decision.moves])),
            state=RebalancePlan.State.APPROVED if auto else RebalancePlan.State.PROPOSED,
            decided_at=now if auto else None,
        )
        save_audited(plan, by=None, reason="auto-approved by pool policy" if auto else "proposed by the rebalancer")
        nodes = {n.key: n for n in nodes_by_key([m.node for m in decision.moves])}
        NodeMove.objects.bulk_create(
            [
                NodeMove(
                    plan=plan,
                    node=nodes[m.node],
                    source=by_name[m.source],
                    target=by_name[m.target],
                    drain_cost_gpu_s=m.drain_cost_gpu_s,
                    reason=m.reason[:300],
                )
                for m in decision.moves
            ]
        )
    if not auto:
        notifications.rebalance_plan_proposed(plan)
    return Proposal(plan, decision)


def held_gpus(keys: list[str]) -> dict[str, int]:
    """GPUs in use per node key (``Node.key``: what the engine's moves name)."""
    return {node.key: node.gpu_allocated for node in nodes_by_key(keys)}


# ------------------------------------------------------------------------------------------ recheck


def _drain_costs_now(now: datetime) -> dict[str, float | None]:
    """Per node, the GPU-seconds a drain loses now (None: a gang there may not be broken): the engine's rule."""
    orchestrators = scheduler_orchestrators()
    preempt = {o.pk: rebalance_options(o).preempt_gangs for o in orchestrators}
    return drain_costs(nodes_now(orchestrators), running_now(orchestrators, preempt), now.timestamp())


def recheck_plan(plan: RebalancePlan, now: datetime | None = None) -> list[str]:
    """What changed, per move, between the plan's proposal and the latest round: a node that was idle and now
    holds GPUs (and what draining it loses now), one that may not be drained any more, one that changed owner
    or went down. Empty: the plan stands on the facts it was proposed on."""
    now = now or timezone.now()
    moves = list(plan.moves.select_related("node", "node__orchestrator", "source").order_by("node__name"))
    costs = _drain_costs_now(now)
    held_then = (plan.expected_effect or {}).get("held_gpus") or {}
    changes: list[str] = []
    for move in moves:
        node, round_at = move.node, move.source.last_success_at
        as_of = f" (as of the round at {round_at:%H:%M} UTC)" if round_at else ""
        if node.orchestrator_id != move.source_id:
            changes.append(f"{node.name} belongs to {node.orchestrator.name} now, not {move.source.name}{as_of}")
            continue
        if node.state == NodeRow.State.DOWN:
            changes.append(f"{node.name} is down now{as_of}")
            continue
        # Plans from before held_gpus was recorded: a drain cost of 0 meant an idle node.
        was = held_then.get(node.key, 0 if move.drain_cost_gpu_s == 0 else None)
        cost = costs.get(node.key, 0.0)
        if cost is None:
            changes.append(f"{node.name} runs a gang that may not be broken now{as_of}: it cannot be drained")
        elif was is not None and node.gpu_allocated != was:
            then = "idle" if was == 0 else f"holding {plural(was, 'GPU')}"
            changes.append(
                f"{node.name} was {then} when proposed and holds {node.gpu_allocated} of {node.gpu_total} GPUs "
                f"now{as_of}: draining it loses {cost / 3600:.1f} GPU-h, not {move.drain_cost_gpu_s / 3600:.1f}"
            )
    return changes


def _restate_moves(plan: RebalancePlan, now: datetime) -> None:
    """An approval on changed facts: each move's drain cost and reason say what draining costs now."""
    costs = _drain_costs_now(now)
    for move in plan.moves.select_related("node"):
        cost = costs.get(move.node.key) or 0.0
        held = move.node.gpu_allocated
        move.drain_cost_gpu_s = cost
        move.reason = f"{move.reason.split('; at approval:')[0]}; at approval: holds {plural(held, 'GPU')}"[:300]
        move.save(update_fields=["drain_cost_gpu_s", "reason", "updated_at"])


def resumable_plan_ids() -> list[int]:
    """Approved or applying plans: a worker lost between steps is made good by queueing them again."""
    states = (RebalancePlan.State.APPROVED, RebalancePlan.State.APPLYING)
    return list(RebalancePlan.objects.filter(state__in=states).values_list("pk", flat=True))


def _plan_reason(decision: RebalanceDecision) -> str:
    flows: dict[tuple[str, str], int] = defaultdict(int)
    for move in decision.moves:
        flows[(move.source, move.target)] += move.gpus
    text = "; ".join(f"{gpus} GPUs {source} -> {target}" for (source, target), gpus in sorted(flows.items()))
    targets = ", ".join(f"{t.orchestrator} {t.current_gpus}->{t.target_gpus}" for t in decision.targets)
    return f"{text} (targets: {targets})"


# ------------------------------------------------------------------------------------------- decide


def _require_admin(by) -> None:
    if by is None or not by.has_perm("scheduling.edit_pool_policies"):
        raise PermissionDenied("Only portal admins decide rebalance plans.")


@transaction.atomic
def approve_plan(
    plan: RebalancePlan, *, by, reason: str, seen_version: int | None = None, accept_changes: bool = False
) -> RebalancePlan:
    """Approve after checking the plan against the latest round: a plan whose facts changed (recheck_plan) is
    refused with what changed, unless the admin has read it (``accept_changes``); its moves then carry
    today's drain cost, and the audited reason says it was approved on changed facts."""
    changes = recheck_plan(plan)
    if changes and not accept_changes:
        again = "Approve again with “approve on today's facts” ticked, or reject it for the rebalancer to propose anew."
        raise ValidationError({"moves": [f"Changed since {plan} was proposed: {c}." for c in changes] + [again]})
    if changes:
        reason = f"{require_reason(reason)} (approved on changed facts: {'; '.join(changes)})"[:COMMENT_MAX_CHARS]
    decided = _decide(plan, RebalancePlan.State.APPROVED, by=by, reason=reason, seen_version=seen_version)
    if changes:
        _restate_moves(decided, timezone.now())
    return decided


@transaction.atomic
def reject_plan(plan: RebalancePlan, *, by, reason: str, seen_version: int | None = None) -> RebalancePlan:
    return _decide(plan, RebalancePlan.State.REJECTED, by=by, reason=reason, seen_version=seen_version)


def _decide(plan: RebalancePlan, state: str, *, by, reason: str, seen_version: int | None = None) -> RebalancePlan:
    _require_admin(by)
    reason = require_reason(reason)
    plan = RebalancePlan.objects.select_for_update().get(pk=plan.pk)
    versions.require_version(plan, seen_version, str(plan))
    if plan.state != RebalancePlan.State.PROPOSED:
        state_now = plan.get_state_display().lower()
        raise ValidationError({"state": f"{plan} is {state_now}; only proposed plans are decided"})
    plan.state, plan.decided_by, plan.decided_at = state, by, timezone.now()
    save_audited(plan, by=by, reason=reason)
    return plan


# ------------------------------------------------------------------------------------- actuation verbs


class DrainTimeout(Exception):
    pass


class PoolVerbs:
    """What applying a move needs from one orchestrator. Every verb is idempotent."""

    def __init__(self, orchestrator: Orchestrator, dry_run: bool) -> None:
        self.orchestrator, self.dry_run = orchestrator, dry_run

    def release(self, node: str, why: str) -> str:
        """Stop new work landing on the node here (work already running finishes)."""
        raise NotImplementedError

    def undo_release(self, node: str) -> str:
        raise NotImplementedError

    def is_empty(self, node: NodeRow) -> bool:
        return node.gpu_allocated == 0

    def take(self, node: str) -> str:
        """Start scheduling on the node here."""
        raise NotImplementedError

    def undo_take(self, node: str) -> str:
        raise NotImplementedError

    def verify_released(self, node: NodeRow) -> bool:
        return True

    def verify_taken(self, node: NodeRow, since: datetime) -> bool:
        return True


class DemoVerbs(PoolVerbs):
    """The demo federation's orchestrators are this database: the stepper skips DRAINING/DRAINED nodes."""

    def _state(self, node: str, state: str) -> str:
        NodeRow.objects.filter(domain=self.orchestrator.node_domain, name=node).update(state=state)
        return f"demo: {node} state={state}"

    def release(self, node: str, why: str) -> str:
        return self._state(node, NodeRow.State.DRAINING)

    def undo_release(self, node: str) -> str:
        return self._state(node, NodeRow.State.IDLE)

    def is_empty(self, node: NodeRow) -> bool:
        if node.gpu_allocated == 0:
            self._state(node.name, NodeRow.State.DRAINED)
            return True
        return False

    def take(self, node: str) -> str:
        return self._state(node, NodeRow.State.IDLE)

    def undo_take(self, node: str) -> str:
        return self._state(node, NodeRow.State.DRAINED)

    def verify_taken(self, node: NodeRow, since: datetime) -> bool:
        """The next demo round has seen the node under its new owner."""
        return node.orchestrator_id == self.orchestrator.pk and bool(node.last_seen_at and node.last_seen_at > since)


class ActuatedVerbs(PoolVerbs):
    """A real orchestrator's verbs (``collectors/verbs.py``), handed the node rows' names."""

    def __init__(self, orchestrator: Orchestrator, dry_run: bool) -> None:
        super().__init__(orchestrator, dry_run)
        self.actuated: OrchestratorVerbs = verbs_for_kind(
            orchestrator, dry_run, owned=lambda: owned_node_count(orchestrator)
        )

    def release(self, node: str, why: str) -> str:
        return self.actuated.release(node, why)

    def undo_release(self, node: str) -> str:
        return self.actuated.undo_release(node)

    def is_empty(self, node: NodeRow) -> bool:
        empty = self.actuated.is_empty(node.name)
        return super().is_empty(node) if empty is None else empty

    def take(self, node: str) -> str:
        return self.actuated.take(node)

    def undo_take(self, node: str) -> str:
        return self.actuated.undo_take(node)

    def verify_released(self, node: NodeRow) -> bool:
        return self.actuated.verify_released(node.name)

    def verify_taken(self, node: NodeRow, since: datetime) -> bool:
        return self.actuated.verify_taken(node.name)


def verbs_for(orchestrator: Orchestrator, dry_run: bool) -> PoolVerbs:
    if orchestrator.is_demo:
        return DemoVerbs(orchestrator, dry_run)
    return ActuatedVerbs(orchestrator, dry_run)


# -------------------------------------------------------------------------------------------- apply


@dataclass(frozen=True)
class StepOutcome:
    plan_state: str
    finished: bool
    message: str = ""


def apply_step(plan_id: int, now: datetime | None = None, verbs=verbs_for) -> StepOutcome:
    """Advance every move of an approved/applying plan by one transition (idempotent, one transaction)."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = RebalancePlan.objects.select_for_update().get(pk=plan_id)
        if plan.state == RebalancePlan.State.APPROVED:
            plan.state = RebalancePlan.State.APPLYING
            save_audited(plan, by=plan.decided_by, reason="apply started" + (" (dry run)" if plan.dry_run else ""))
        if plan.state != RebalancePlan.State.APPLYING:
            return StepOutcome(plan.state, True, f"{plan} is {plan.state}: nothing to apply")
        moves = list(plan.moves.select_related("node", "node__orchestrator", "source", "target").order_by("pk"))
        if plan.dry_run:
            return _dry_run(plan, moves, verbs)
        verbs_of = _cached_verbs(verbs)
        plan.heartbeat_at = now  # committed only with the step (and kept by the plan's later saves)
        RebalancePlan.objects.filter(pk=plan.pk).update(heartbeat_at=now)
        timeout = timedelta(seconds=float(rebalance_settings()["drain_timeout_s"]))
        for move in moves:
            try:
                _advance(plan, move, verbs_of, now, timeout)
            except (CollectorError, DrainTimeout, ValueError, OSError) as error:
                return _fail(plan, moves, verbs_of, f"{move.node.name}: {error}")
        if all(m.state == NodeMove.State.MOVED for m in moves):
            if all(_verified(m, verbs_of) for m in moves):
                plan.state = RebalancePlan.State.APPLIED
                save_audited(plan, by=plan.decided_by, reason="applied: every node verified with its new owner")
                return StepOutcome(plan.state, True, "applied")
            if now - max(m.updated_at for m in moves) > timeout:
                # Handed over but never seen right: nothing to roll back safely, so say so and stop.
                plan.state = RebalancePlan.State.FAILED
                plan.error = "moved, but the orchestrators never confirmed the new owner; check the nodes by hand"
                save_audited(plan, by=plan.decided_by, reason="failed: not verified")
                return StepOutcome(plan.state, True, plan.error)
        return StepOutcome(plan.state, False, _progress(moves))


def _cached_verbs(verbs):
    """One PoolVerbs per orchestrator for the length of a step (clients are built once)."""
    cache: dict[int, PoolVerbs] = {}

    def verbs_of(orchestrator: Orchestrator) -> PoolVerbs:
        if orchestrator.pk not in cache:
            cache[orchestrator.pk] = verbs(orchestrator, False)
        return cache[orchestrator.pk]

    return verbs_of


def reap_stale(now: datetime, *, limits: dict[str, float], verbs=verbs_for) -> dict[str, int]:
    """Fail applying plans with no step completed for ``plan_after_s``, rolling back their draining nodes."""
    cutoff = now - timedelta(seconds=limits["plan_after_s"])
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, decided_at__lt=cutoff)
    failed = 0
    for pk in RebalancePlan.objects.filter(silent, state=RebalancePlan.State.APPLYING).values_list("pk", flat=True):
        failed += _abandon(pk, cutoff, verbs)
    return {"failed": failed}


def _abandon(plan_id: int, cutoff: datetime, verbs) -> bool:
    with transaction.atomic():
        plan = RebalancePlan.objects.select_for_update().get(pk=plan_id)
        last = plan.heartbeat_at or plan.decided_at
        if plan.state != RebalancePlan.State.APPLYING or (last is not None and last >= cutoff):
            return False  # a step completed meanwhile
        moves = list(plan.moves.select_related("node", "node__orchestrator", "source", "target").order_by("pk"))
        since = f"{last:%Y-%m-%d %H:%M} UTC" if last else "it was approved"
        _fail(
            plan,
            moves,
            _cached_verbs(verbs),
            f"no apply step completed since {since}: its task keeps failing or no worker runs it",
        )
    return True


def _progress(moves: list[NodeMove]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for move in moves:
        counts[move.state] += 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def _advance(plan: RebalancePlan, move: NodeMove, verbs_of, now: datetime, timeout: timedelta) -> None:
    node, source, target = move.node, move.source, move.target
    if move.state == NodeMove.State.PENDING:
        if node.orchestrator_id != source.pk:
            raise ValueError(f"owned by {node.orchestrator.name}, not {source.name}: the plan is stale")
        if node.pinned:
            raise ValueError("pinned since the plan was made")
        verbs_of(source).release(node.name, f"gpuportal plan {plan.pk}: to {target.name}")
        move.state = NodeMove.State.DRAINING
        move.save(update_fields=["state", "updated_at"])
    elif move.state == NodeMove.State.DRAINING:
        node.refresh_from_db()
        if verbs_of(source).is_empty(node):
            if not move.drains_only:  # a drain ends here: the node stays released, with its owner
                verbs_of(target).take(node.name)
                node.refresh_from_db()
                node.orchestrator = target
                save_audited(
                    node, by=plan.decided_by, reason=f"rebalance plan #{plan.pk}: {source.name} -> {target.name}"
                )
            move.state = NodeMove.State.MOVED
            move.save(update_fields=["state", "updated_at"])
        elif now - move.updated_at > timeout:
            raise DrainTimeout(f"still busy after the drain timeout of {timeout.total_seconds():.0f} s")


def _verified(move: NodeMove, verbs_of) -> bool:
    move.node.refresh_from_db()
    released = verbs_of(move.source).verify_released(move.node)
    return released and (move.drains_only or verbs_of(move.target).verify_taken(move.node, move.updated_at))


def _fail(plan: RebalancePlan, moves: list[NodeMove], verbs_of, reason: str) -> StepOutcome:
    """Put every node that is between owners back with its source, then fail the plan with the reason."""
    involved = {o.pk: o for m in moves for o in (m.source, m.target)}.values()
    reason = masked(reason, *involved)  # an actuator's error may quote the credentials it sent
    problems = []
    for move in moves:
        if move.state != NodeMove.State.DRAINING:
            continue
        try:
            _roll_back(plan, move, verbs_of)
            move.state = NodeMove.State.ROLLED_BACK
        except (CollectorError, ValueError, OSError) as error:
            move.state = NodeMove.State.FAILED
            problems.append(masked(f"{move.node.name} could not be rolled back ({error}); check it by hand", *involved))
        move.save(update_fields=["state", "updated_at"])
    plan.state = RebalancePlan.State.FAILED
    plan.error = "; ".join([reason, *problems])[:2000]
    save_audited(plan, by=plan.decided_by, reason=f"failed: {reason}"[:100])
    log.warning("rebalance %s failed: %s", plan, plan.error)
    return StepOutcome(plan.state, True, plan.error)


def _roll_back(plan: RebalancePlan, move: NodeMove, verbs_of) -> None:
    node = move.node
    node.refresh_from_db()
    if node.orchestrator_id == move.target_id and not move.drains_only:
        verbs_of(move.target).undo_take(node.name)
        node.refresh_from_db()
        node.orchestrator = move.source
        save_audited(node, by=plan.decided_by, reason=f"rebalance plan #{plan.pk} rolled back")
    verbs_of(move.source).undo_release(node.name)


def _dry_run(plan: RebalancePlan, moves: list[NodeMove], verbs) -> StepOutcome:
    """What applying would send, recorded on the plan; no orchestrator and no node row changes."""
    actions = []
    for move in moves:
        source, target = verbs(move.source, True), verbs(move.target, True)
        demo = isinstance(source, DemoVerbs) or isinstance(target, DemoVerbs)
        why = f"gpuportal plan {plan.pk}: " + ("drain" if move.drains_only else f"to {move.target.name}")
        # The demo's verbs write this database: a dry run only says what they would do.
        release = f"demo: {move.node.name} state=draining" if demo else source.release(move.node.name, why)
        action = {"node": move.node.name, "release": release}
        if not move.drains_only:
            action["take"] = f"demo: owner -> {move.target.name}" if demo else target.take(move.node.name)
        actions.append(action)
    plan.expected_effect = {**plan.expected_effect, "dry_run_actions": actions}
    plan.state = RebalancePlan.State.APPLIED
    save_audited(plan, by=plan.decided_by, reason="dry run: the commands are recorded, nothing was changed")
    return StepOutcome(plan.state, True, "dry run")
