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

Per orchestrator, ``options["rebalance"]`` may hold ``dry_run`` (default true; false for ``demo://``,
whose "orchestrator" is this database), ``auto_apply`` (default false), ``preempt_gangs`` (may a drain
break a multi-node gang there; default false), ``target_utilization_fraction`` (default 0.8),
``ray_node_type`` and ``autoscaler_config`` (Ray), ``slurm_conf`` (Slurm, for scontrol).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from scheduling.collectors import CollectorError, KubernetesActuator, RayActuator, SlurmActuator
from scheduling.engine.calendar import bounds_at, describe_moment
from scheduling.engine.rebalance import (
    PendingItem,
    PoolDemand,
    RebalanceConfig,
    RebalanceDecision,
    plan_rebalance,
    target_split,
)
from scheduling.engine.types import MemberAssignment, RunningWorkload, WorkloadKind
from scheduling.engine.types import Node as EngineNode
from scheduling.models import Node as NodeRow
from scheduling.models import NodeMove, Orchestrator, RebalancePlan, UsageRollup, UsageSample, Workload

from .audit import require_reason, save_audited
from .collection import kubernetes_api
from .orchestrators import endpoint_of, masked, resolve_secret
from .demo import DEMO_PREFIX
from .pool_policies import bounds_now, enabled_rules, local_moment

log = logging.getLogger(__name__)

OPEN_STATES = (RebalancePlan.State.PROPOSED, RebalancePlan.State.APPROVED, RebalancePlan.State.APPLYING)
DRAIN_TAINT = "gpuportal.io/rebalance"
POOL_LABEL = "gpuportal.io/pool"
DEFAULTS = {
    "max_moves": 4,
    "hold_s": 1800.0,
    "dead_band_fraction": 0.05,
    "dead_band_min_gpus": 8,
    "target_utilization": 0.8,
    "drain_timeout_s": 3600.0,
    "trend_window_s": 3600.0,
    "step_retry_s": 15.0,
    "floor_lead_s": 3600.0,
}


def rebalance_settings() -> dict:
    return {**DEFAULTS, **getattr(settings, "GPUPORTAL_REBALANCE", {})}


def engine_config() -> RebalanceConfig:
    values = rebalance_settings()
    return RebalanceConfig(
        target_utilization=float(values["target_utilization"]),
        dead_band_fraction=float(values["dead_band_fraction"]),
        dead_band_min_gpus=int(values["dead_band_min_gpus"]),
        hold_s=float(values["hold_s"]),
        max_moves=int(values["max_moves"]),
    )


def _options(orchestrator: Orchestrator) -> dict:
    return dict((orchestrator.options or {}).get("rebalance") or {})


def is_demo(orchestrator: Orchestrator) -> bool:
    return orchestrator.endpoint.startswith(DEMO_PREFIX)


def dry_run_for(orchestrator: Orchestrator) -> bool:
    return bool(_options(orchestrator).get("dry_run", not is_demo(orchestrator)))


def auto_apply_for(orchestrator: Orchestrator) -> bool:
    return bool(_options(orchestrator).get("auto_apply", False))


def scheduler_orchestrators() -> list[Orchestrator]:
    return list(Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS))


# ------------------------------------------------------------------------------------------- inputs


def _epoch(moment: datetime | None) -> float:
    return moment.timestamp() if moment else 0.0


def nodes_now(orchestrators: list[Orchestrator]) -> list[EngineNode]:
    """The fleet for the engine; nodes already in an open plan count as unschedulable (not movable twice)."""
    in_flight = (NodeMove.State.PENDING, NodeMove.State.DRAINING)
    busy = set(
        NodeMove.objects.filter(plan__state__in=OPEN_STATES, state__in=in_flight).values_list("node_id", flat=True)
    )
    unschedulable = (NodeRow.State.DRAINING, NodeRow.State.DRAINED, NodeRow.State.DOWN)
    return [
        EngineNode(
            name=n.name,
            gpu_total=n.gpu_total,
            gpu_model=n.gpu_model,
            orchestrator=n.orchestrator.name,
            pinned=n.pinned,
            schedulable=n.state not in unschedulable and n.pk not in busy,
            nvlink_domain=n.nvlink_domain,
            leaf_switch=n.leaf_switch,
        )
        for n in NodeRow.objects.filter(orchestrator__in=orchestrators).select_related("orchestrator")
    ]


def running_now(orchestrators: list[Orchestrator]) -> list[RunningWorkload]:
    preempt = {o.pk: bool(_options(o).get("preempt_gangs", False)) for o in orchestrators}
    rows = Workload.objects.filter(orchestrator__in=orchestrators, state=Workload.State.RUNNING)
    running = []
    for row in rows.only(
        "external_id",
        "orchestrator_id",
        "gang_size",
        "gpus_per_member",
        "priority",
        "started_at",
        "duration_estimate_s",
        "kind",
        "nodes",
    ):
        assignments = tuple(
            MemberAssignment(i, str(a.get("node", "")), tuple(a.get("gpus") or range(row.gpus_per_member)))
            for i, a in enumerate(row.nodes or ())
            if isinstance(a, dict)
        )
        started = _epoch(row.started_at)
        running.append(
            RunningWorkload(
                id=row.external_id,
                team="",
                gpus=float(row.gang_size * row.gpus_per_member),
                assignments=assignments,
                priority=row.priority,
                started_at=started,
                gang_id=row.external_id,
                preemptible=row.gang_size <= 1 or preempt[row.orchestrator_id],
                kind=WorkloadKind(row.kind) if row.kind in WorkloadKind._value2member_map_ else WorkloadKind.BATCH,
                expected_end=started + row.duration_estimate_s if row.duration_estimate_s else None,
            )
        )
    return running


def demand_now(orchestrators: list[Orchestrator], now: datetime) -> dict[str, PoolDemand]:
    """Per orchestrator: its pending gangs (GPUs, priority, age), GPUs running, and the trend of
    allocated + pending over the last ``trend_window_s`` (from the usage samples)."""
    pending: dict[int, list[PendingItem]] = defaultdict(list)
    allocated: dict[int, float] = defaultdict(float)
    rows = Workload.objects.filter(orchestrator__in=orchestrators, state__in=Workload.ACTIVE_STATES).values_list(
        "orchestrator_id", "state", "gang_size", "gpus_per_member", "priority", "submitted_at"
    )
    for orch_id, state, gang, per_member, priority, submitted in rows:
        if state == Workload.State.RUNNING:
            allocated[orch_id] += gang * per_member
        else:
            pending[orch_id].append(PendingItem(gang * per_member, priority, (now - submitted).total_seconds()))
    trend = _trends(orchestrators, now)
    return {
        o.name: PoolDemand(
            o.name,
            tuple(pending[o.pk]),
            allocated[o.pk],
            trend.get(o.pk, 0.0),
            _options(o).get("target_utilization_fraction"),
        )
        for o in orchestrators
    }


def _trends(orchestrators: list[Orchestrator], now: datetime) -> dict[int, float]:
    window = timedelta(seconds=float(rebalance_settings()["trend_window_s"]))
    samples = (
        UsageSample.objects.filter(
            team__isnull=True, orchestrator__in=orchestrators, taken_at__gte=now - window, taken_at__lte=now
        )
        .order_by("taken_at")
        .values_list("orchestrator_id", "taken_at", "gpus_allocated", "gpus_pending")
    )
    ends: dict[int, list[tuple[datetime, float]]] = defaultdict(list)
    for orch_id, taken_at, alloc, pend in samples:
        ends[orch_id].append((taken_at, alloc + pend))
    trends = {}
    for orch_id, points in ends.items():
        (first_at, first), (last_at, last) = points[0], points[-1]
        hours = (last_at - first_at).total_seconds() / 3600
        if hours > 0:
            trends[orch_id] = (last - first) / hours
    return trends


def held_seconds(now: datetime) -> dict[str, float]:
    """Seconds since each orchestrator last gained or lost a node through a plan (the hold time's clock)."""
    last: dict[str, datetime] = {}
    moved = NodeMove.objects.filter(state=NodeMove.State.MOVED)
    for field in ("source__name", "target__name"):
        for name, at in moved.values(field).annotate(at=Max("updated_at")).values_list(field, "at"):
            last[name] = max(at, last.get(name, at))
    return {name: (now - at).total_seconds() for name, at in last.items()}


def decide_now(now: datetime | None = None) -> RebalanceDecision:
    """The engine's decision for this moment (nothing stored): what the page shows as "target now"."""
    now = now or timezone.now()
    orchestrators = scheduler_orchestrators()
    return plan_rebalance(
        nodes_now(orchestrators),
        running_now(orchestrators),
        demand_now(orchestrators, now),
        bounds_now(now, float(rebalance_settings()["floor_lead_s"])),
        _epoch(now),
        engine_config(),
        held_seconds(now),
    )


# ------------------------------------------------------------------------------------------ propose


@dataclass(frozen=True)
class Proposal:
    plan: RebalancePlan | None
    decision: RebalanceDecision | None
    skipped: str = ""


def _effect_document(decision: RebalanceDecision, now: datetime) -> dict:
    return {
        "at": now.isoformat(),
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
            expected_effect=_effect_document(decision, now),
            state=RebalancePlan.State.APPROVED if auto else RebalancePlan.State.PROPOSED,
            decided_at=now if auto else None,
        )
        save_audited(plan, by=None, reason="auto-approved by pool policy" if auto else "proposed by the rebalancer")
        nodes = {n.name: n for n in NodeRow.objects.filter(name__in=[m.node for m in decision.moves])}
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
    return Proposal(plan, decision)


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
def approve_plan(plan: RebalancePlan, *, by, reason: str) -> RebalancePlan:
    return _decide(plan, RebalancePlan.State.APPROVED, by=by, reason=reason)


@transaction.atomic
def reject_plan(plan: RebalancePlan, *, by, reason: str) -> RebalancePlan:
    return _decide(plan, RebalancePlan.State.REJECTED, by=by, reason=reason)


def _decide(plan: RebalancePlan, state: str, *, by, reason: str) -> RebalancePlan:
    _require_admin(by)
    reason = require_reason(reason)
    plan = RebalancePlan.objects.select_for_update().get(pk=plan.pk)
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
        NodeRow.objects.filter(name=node).update(state=state)
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


class SlurmVerbs(PoolVerbs):
    def __init__(self, orchestrator: Orchestrator, dry_run: bool) -> None:
        super().__init__(orchestrator, dry_run)
        options = orchestrator.options or {}
        conf = _options(orchestrator).get("slurm_conf") or options.get("slurm_conf")
        self.actuator = SlurmActuator(
            endpoint_of(orchestrator),
            resolve_secret(orchestrator.credentials_ref),
            options.get("user", "slurm"),
            options.get("api_version", "v0.0.38"),
            dry_run=dry_run,
            env={"SLURM_CONF": conf} if conf else None,
        )

    def release(self, node: str, why: str) -> str:
        return self.actuator.drain(node, why).command_or_request

    def undo_release(self, node: str) -> str:
        return self.actuator.resume(node).command_or_request

    def is_empty(self, node: NodeRow) -> bool:
        """Drained in Slurm's words: IDLE+DRAIN (DRAINING while jobs still run)."""
        base, flags, _reason = self.actuator.node_state(node.name)
        return base in ("idle", "down") and "DRAIN" in flags

    def take(self, node: str) -> str:
        return self.actuator.resume(node).command_or_request

    def undo_take(self, node: str) -> str:
        return self.actuator.drain(node, "gpuportal: rebalance rolled back").command_or_request

    def verify_released(self, node: NodeRow) -> bool:
        return "DRAIN" in self.actuator.node_state(node.name)[1]

    def verify_taken(self, node: NodeRow, since: datetime) -> bool:
        return "DRAIN" not in self.actuator.node_state(node.name)[1]


class KubernetesVerbs(PoolVerbs):
    def __init__(self, orchestrator: Orchestrator, dry_run: bool) -> None:
        super().__init__(orchestrator, dry_run)
        self.api = kubernetes_api(orchestrator)
        self.actuator = KubernetesActuator(self.api, dry_run=dry_run)

    def release(self, node: str, why: str) -> str:
        cordon = self.actuator.cordon(node)
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining")
        return f"{cordon.command_or_request}; {taint.command_or_request}"

    def undo_release(self, node: str) -> str:
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining", remove=True)
        return f"{taint.command_or_request}; {self.actuator.uncordon(node).command_or_request}"

    def is_empty(self, node: NodeRow) -> bool:
        """No pod left on the node but DaemonSet pods and finished ones."""
        from kubernetes import client

        pods = client.CoreV1Api(self.api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node.name}")
        return not [
            p
            for p in pods.items
            if p.status.phase not in ("Succeeded", "Failed")
            and not any(ref.kind == "DaemonSet" for ref in (p.metadata.owner_references or ()))
        ]

    def take(self, node: str) -> str:
        label = self.actuator.label(node, POOL_LABEL, self.orchestrator.name)
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining", remove=True)
        return "; ".join(r.command_or_request for r in (label, taint, self.actuator.uncordon(node)))

    def undo_take(self, node: str) -> str:
        cordon = self.actuator.cordon(node)
        return f"{cordon.command_or_request}; {self.actuator.label(node, POOL_LABEL, None).command_or_request}"

    def _read(self, node: str) -> tuple[bool, dict]:
        from kubernetes import client

        raw = client.CoreV1Api(self.api).read_node(node)
        return bool(raw.spec.unschedulable), dict(raw.metadata.labels or {})

    def verify_released(self, node: NodeRow) -> bool:
        return self._read(node.name)[0]

    def verify_taken(self, node: NodeRow, since: datetime) -> bool:
        unschedulable, labels = self._read(node.name)
        return not unschedulable and labels.get(POOL_LABEL) == self.orchestrator.name


class RayVerbs(PoolVerbs):
    """Ray's autoscaler bound for the node type follows the nodes Ray owns (observe only without a config)."""

    def __init__(self, orchestrator: Orchestrator, dry_run: bool) -> None:
        super().__init__(orchestrator, dry_run)
        options = _options(orchestrator)
        self.node_type = options.get("ray_node_type", "gpu_worker")
        self.actuator = RayActuator(options.get("autoscaler_config"), dry_run=dry_run)

    def _bound(self, delta: int) -> str:
        owned = NodeRow.objects.filter(orchestrator=self.orchestrator).count()
        count = max(0, owned + delta)
        result = self.actuator.set_bounds(self.node_type, min(count, owned), count)
        return f"{result.command_or_request} ({result.message})"

    def release(self, node: str, why: str) -> str:
        return self._bound(-1)

    def undo_release(self, node: str) -> str:
        return self._bound(0)

    def take(self, node: str) -> str:
        return self._bound(0)  # the node row is already ours when this runs

    def undo_take(self, node: str) -> str:
        return self._bound(-1)


def verbs_for(orchestrator: Orchestrator, dry_run: bool) -> PoolVerbs:
    if is_demo(orchestrator):
        return DemoVerbs(orchestrator, dry_run)
    kinds = {
        Orchestrator.Kind.SLURM: SlurmVerbs,
        Orchestrator.Kind.KUBERNETES: KubernetesVerbs,
        Orchestrator.Kind.RAY: RayVerbs,
    }
    return kinds[orchestrator.kind](orchestrator, dry_run)


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
            verbs_of(target).take(node.name)
            node.refresh_from_db()
            node.orchestrator = target
            save_audited(node, by=plan.decided_by, reason=f"rebalance plan #{plan.pk}: {source.name} -> {target.name}")
            move.state = NodeMove.State.MOVED
            move.save(update_fields=["state", "updated_at"])
        elif now - move.updated_at > timeout:
            raise DrainTimeout(f"still busy after the drain timeout of {timeout.total_seconds():.0f} s")


def _verified(move: NodeMove, verbs_of) -> bool:
    move.node.refresh_from_db()
    return verbs_of(move.source).verify_released(move.node) and verbs_of(move.target).verify_taken(
        move.node, move.updated_at
    )


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
    if node.orchestrator_id == move.target_id:
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
        if isinstance(source, DemoVerbs) or isinstance(target, DemoVerbs):
            actions.append(
                {
                    "node": move.node.name,
                    "release": f"demo: {move.node.name} state=draining",
                    "take": f"demo: owner -> {move.target.name}",
                }
            )
            continue
        actions.append(
            {
                "node": move.node.name,
                "release": source.release(move.node.name, f"gpuportal plan {plan.pk}: to {move.target.name}"),
                "take": target.take(move.node.name),
            }
        )
    plan.expected_effect = {**plan.expected_effect, "dry_run_actions": actions}
    plan.state = RebalancePlan.State.APPLIED
    save_audited(plan, by=plan.decided_by, reason="dry run: the commands are recorded, nothing was changed")
    return StepOutcome(plan.state, True, "dry run")


# -------------------------------------------------------------------------------------------- reads


@dataclass(frozen=True)
class SplitPoint:
    at: datetime
    orchestrator: str
    owned: float
    allocated: float
    pending: float
    target: float


def split_history(since: datetime, until: datetime) -> list[SplitPoint]:
    """Per hour and orchestrator: GPUs owned and the target the engine would have set from that hour's
    demand and calendar (hourly rollups; the target is recomputed, so it is there for every hour)."""
    orchestrators = scheduler_orchestrators()
    names = {o.pk: o.name for o in orchestrators}
    rows = UsageRollup.objects.filter(
        Q(resolution=UsageRollup.Resolution.HOUR, team__isnull=True, orchestrator__in=orchestrators)
        & Q(period_start__gte=since, period_start__lt=until)
    ).values_list("period_start", "orchestrator_id", "gpu_s_total", "gpu_s_allocated", "gpu_s_pending", "covered_s")
    hours: dict[datetime, dict[str, tuple[float, float, float]]] = defaultdict(dict)
    for start, orch_id, total, alloc, pend, covered in rows:
        if covered:
            hours[start][names[orch_id]] = (total / covered, alloc / covered, pend / covered)
    rules, config, points = enabled_rules(), engine_config(), []
    for start in sorted(hours):
        values = hours[start]
        demand = {n: PoolDemand(n, (PendingItem(p),) if p else (), a) for n, (_t, a, p) in values.items()}
        current = {n: round(t) for n, (t, _a, _p) in values.items()}
        weekday, minute = local_moment(start)
        targets = target_split(current, demand, bounds_at(rules, weekday, minute), config)
        for target in targets:
            owned, alloc, pend = values.get(target.orchestrator, (0.0, 0.0, 0.0))
            points.append(SplitPoint(start, target.orchestrator, owned, alloc, pend, target.target_gpus))
    return points
