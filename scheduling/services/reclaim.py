"""Keep every guarantee: each round, per orchestrator, the engine's reclaim decision becomes a plan (review),
is applied at once (auto) or is left to the orchestrator's own reclaim (native); docs/governance.md, "Reclaim".

Applying stops each victim with the orchestrator's lever (``collectors/reclaim_actuators.py``): Slurm requeue,
the Kubernetes Eviction API (PodDisruptionBudgets hold), Ray job stop. Every plan keeps its cause (the owner,
its guarantee, what waited) and each action's result; its history rows say who decided and why.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.collectors.actuators import ActionResult
from scheduling.collectors.errors import CollectorError
from scheduling.collectors.governance_apply import ApplyResult
from scheduling.collectors.ray import RayCollector
from scheduling.collectors.reclaim_actuators import KubernetesEviction, RayJobStop, SlurmRequeue
from scheduling.engine.governance_types import KUEUE_RECLAIM_ANY, NativeKind, RayPoolBounds
from scheduling.engine.reclaim import (
    CeilingDecision,
    Holding,
    ReclaimDecision,
    ReclaimPolicy,
    plan_ceiling,
    plan_reclaims,
)
from scheduling.models import AppliedObject, Orchestrator, ReclaimPlan, Workload
from scheduling.rules import is_portal_admin
from scheduling.selectors.reclaim import guarantees_by_orchestrator, open_plans, reclaim_inputs
from scheduling.services.audit import require_reason, stamp_author
from scheduling.services.orchestrators import endpoint_of, kubernetes_api, option
from scheduling.services.orchestrators import teams_of as orchestrator_teams

MODES = ("off", "native", "review", "auto")
DEFAULT_MODE = "review"


@dataclass(frozen=True)
class ReclaimSettings:
    mode: str
    policy: ReclaimPolicy
    dry_run: bool = False
    eviction_grace_s: int | None = None


def reclaim_settings(orchestrator: Orchestrator) -> ReclaimSettings:
    """``options.reclaim`` (shape checked on save, scheduling/orchestrator_options.py)."""
    options = dict(option(orchestrator, "reclaim") or {})
    defaults = ReclaimPolicy()
    return ReclaimSettings(
        mode=str(options.get("mode", DEFAULT_MODE)),
        policy=ReclaimPolicy(float(options.get("min_runtime_s", defaults.min_runtime_s)),
                             float(options.get("grace_s", defaults.grace_s))),
        dry_run=bool(options.get("dry_run", False)),
        eviction_grace_s=options.get("eviction_grace_s"),
    )


# Ray has no per-team guarantee to keep: its lever (the Jobs API's stop) holds the pool ceiling (``RayPool``).
RECLAIM_KINDS = (Orchestrator.Kind.SLURM, Orchestrator.Kind.KUBERNETES)


def reclaiming_orchestrators() -> list[Orchestrator]:
    candidates = Orchestrator.objects.filter(enabled=True, kind__in=RECLAIM_KINDS)
    return [o for o in candidates if not o.endpoint.startswith("demo://") and reclaim_settings(o).mode != "off"]


def reclaim_round(orchestrator_id: int, now: datetime | None = None) -> ReclaimPlan | None:
    """One round on one orchestrator: decide, then store (review), apply (auto) or record (native). None when
    no team below its guarantee waits on borrowed GPUs there."""
    now = now or timezone.now()
    orchestrator = Orchestrator.objects.get(pk=orchestrator_id)
    settings = reclaim_settings(orchestrator)
    if settings.mode == "off" or orchestrator.kind not in RECLAIM_KINDS:
        return None
    inputs = reclaim_inputs(orchestrator)
    guarantees = guarantees_by_orchestrator([orchestrator], now)[orchestrator.pk]
    decision = plan_reclaims(inputs.nodes, inputs.running, inputs.pending, guarantees, now=now.timestamp(),
                             policy=settings.policy)
    if not decision.reclaims:
        return None
    plan = _store(orchestrator, decision, settings, now)
    if settings.mode == "auto":
        return apply_reclaim_plan(plan.pk)
    return plan


@transaction.atomic
def _store(orchestrator: Orchestrator, decision: ReclaimDecision, settings: ReclaimSettings,
           now: datetime) -> ReclaimPlan:
    """The round's plan; a newer decision supersedes a plan nobody decided yet (it may name victims that ended)."""
    for stale in open_plans(orchestrator).filter(state=ReclaimPlan.State.PENDING).select_for_update():
        stamp_author(stale, by=None, reason="superseded by a newer reclaim decision")
        stale.state = ReclaimPlan.State.SUPERSEDED
        stale.save()
    state = {"auto": ReclaimPlan.State.APPROVED, "native": ReclaimPlan.State.NATIVE}.get(
        settings.mode, ReclaimPlan.State.PENDING)
    plan = ReclaimPlan(
        orchestrator=orchestrator, created_at=now, mode=settings.mode, dry_run=settings.dry_run, state=state,
        reclaims=[_reclaim_document(reclaim) for reclaim in decision.reclaims],
        passed=[asdict(claim) for claim in decision.passed],
        cause="; ".join(reclaim.cause for reclaim in decision.reclaims),
        decided_at=now if settings.mode == "auto" else None,
        reason={"auto": "auto mode", "native": native_reclaim(orchestrator, decision)}.get(settings.mode, ""),
    )
    stamp_author(plan, by=None, reason=plan.cause[:1000] or "reclaim")
    plan.save()
    return plan


def native_reclaim(orchestrator: Orchestrator, decision: ReclaimDecision) -> str:
    """Who takes the borrowed GPUs back in native mode, from what the portal last wrote there: on Kubernetes,
    Kueue, for each owner whose ClusterQueue carries ``reclaimWithinCohort: Any``; nobody for an owner whose
    queue does not (yet: the next governance round writes it). Said in the plan, so nobody reads "native" as
    "done" where no native reclaim is in force."""
    owners = sorted({reclaim.owner for reclaim in decision.reclaims})
    if orchestrator.kind != Orchestrator.Kind.KUBERNETES:
        return f"native: left to {orchestrator.name}'s own preemption for {', '.join(owners)}"
    queues = {
        settings["name"]: settings
        for settings in AppliedObject.objects.filter(
            orchestrator=orchestrator, kind=NativeKind.KUEUE_CLUSTER_QUEUE.value
        ).values_list("settings", flat=True)
    }
    said = []
    for owner in owners:
        queue = queues.get(owner)
        if queue and queue.get("reclaim_within_cohort") == KUEUE_RECLAIM_ANY:
            said.append(f"Kueue reclaims for {owner}: ClusterQueue {owner} has reclaimWithinCohort Any in cohort "
                        f"{queue.get('cohort')}, so Kueue evicts Workloads running on borrowed quota once "
                        f"{owner}'s pending work fits its nominal quota of {queue.get('nominal_gpus')}")
        else:
            said.append(f"no native reclaim in force for {owner}: no ClusterQueue {owner} with reclaimWithinCohort "
                        f"Any written on {orchestrator.name}")
    return "native: " + "; ".join(said)


def _reclaim_document(reclaim) -> dict:
    return {
        "owner": reclaim.owner, "owner_guarantee": reclaim.owner_guarantee, "owner_held": reclaim.owner_held,
        "request_id": reclaim.request_id, "request_gpus": reclaim.request_gpus, "waited_s": round(reclaim.waited_s),
        "cause": reclaim.cause, "reasons": list(reclaim.reasons),
        "victims": [asdict(victim) for victim in reclaim.victims],
    }


# ------------------------------------------------------------------------------------------- decisions


def _require_admin(by) -> None:
    if not (by and is_portal_admin(by)):
        raise PermissionDenied("Only administrators decide reclaim plans.")


@transaction.atomic
def approve_reclaim_plan(plan_id: int, *, by, reason: str) -> ReclaimPlan:
    return _decide(plan_id, ReclaimPlan.State.APPROVED, by=by, reason=reason)


@transaction.atomic
def reject_reclaim_plan(plan_id: int, *, by, reason: str) -> ReclaimPlan:
    return _decide(plan_id, ReclaimPlan.State.REJECTED, by=by, reason=reason)


def _decide(plan_id: int, state: str, *, by, reason: str) -> ReclaimPlan:
    _require_admin(by)
    reason = require_reason(reason)
    plan = ReclaimPlan.objects.select_for_update().get(pk=plan_id)
    if plan.state != ReclaimPlan.State.PENDING:
        raise ValidationError({"state": f"only a pending plan can be decided; this one is {plan.state}"})
    plan.state, plan.decided_by, plan.decided_at, plan.reason = state, by, timezone.now(), reason
    stamp_author(plan, by=by, reason=reason)
    plan.save()
    return plan


# ------------------------------------------------------------------------------------------- applying


def apply_reclaim_plan(plan_id: int, stoppers=None) -> ReclaimPlan:
    """Stop an approved plan's victims, skipping reclaims whose owner no longer waits (its request started or
    ended since). Idempotent: a victim already stopped answers ``changed=False``."""
    with transaction.atomic():
        plan = ReclaimPlan.objects.select_for_update().select_related("orchestrator").get(pk=plan_id)
        if plan.state != ReclaimPlan.State.APPROVED:
            return plan
        stop = (stoppers or victim_stopper)(plan.orchestrator, plan.dry_run)
        still_waiting = set(
            Workload.objects.filter(orchestrator=plan.orchestrator, state=Workload.State.PENDING,
                                    external_id__in=[r["request_id"] for r in plan.reclaims])
            .values_list("external_id", flat=True)
        )
        actions, errors = [], []
        for reclaim in plan.reclaims:
            if reclaim["request_id"] not in still_waiting:
                actions.append({"victim": "", "verb": "skip", "changed": False, "request": "",
                                "message": f"{reclaim['request_id']} no longer waits: nothing stopped for it"})
                continue
            for gang in dict.fromkeys(victim["gang_id"] for victim in reclaim["victims"]):
                try:
                    actions += [_action(gang, result) for result in stop(gang)]
                except (CollectorError, ValueError) as error:
                    errors.append(f"{gang}: {error}")
        plan.actions, plan.error = actions, "; ".join(errors)
        plan.state = ReclaimPlan.State.FAILED if errors else ReclaimPlan.State.APPLIED
        stamp_author(plan, by=None, reason=f"reclaim applied: {plan.cause}"[:1000])
        plan.save()
        return plan


def _action(victim: str, result: ActionResult) -> dict:
    return {"victim": victim, "verb": result.verb, "changed": result.changed, "dry_run": result.dry_run,
            "request": result.command_or_request, "message": result.message}


def victim_stopper(orchestrator: Orchestrator, dry_run: bool):
    """``stop(workload external id) -> [ActionResult]`` with the orchestrator's lever."""
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        slurm_conf = option(orchestrator, "slurm_conf")
        requeue = SlurmRequeue(dry_run=dry_run, env={"SLURM_CONF": slurm_conf} if slurm_conf else None)
        return lambda job: [requeue.requeue(job)]
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        eviction = KubernetesEviction(kubernetes_api(orchestrator), dry_run=dry_run,
                                      grace_period_s=reclaim_settings(orchestrator).eviction_grace_s)
        return eviction.evict_workload
    raise ValidationError({"kind": f"no reclaim lever for {orchestrator.kind} orchestrators"})


# ------------------------------------------------------------------------------------------- Ray's ceiling


@dataclass
class RayPool:
    """Governance of a Ray pool (services/enforcement.py's ``Cluster``). Ray has no per-team quota, so team caps
    there are observed, not enforced; the pool ceiling (``RayPoolBounds.max_gpus``) is read back from what the
    jobs really hold (the dashboard's Jobs and state APIs) and held by stopping borrowed jobs (the Jobs API), chosen
    by ``engine.reclaim.plan_ceiling``. Each stop is audited as a ``ReclaimPlan`` with its cause."""

    orchestrator: Orchestrator
    kueue: bool = False
    dry_run: bool = False

    def _collector(self):
        return RayCollector(endpoint_of(self.orchestrator), name=self.orchestrator.name,
                            teams=orchestrator_teams(self.orchestrator))

    def read(self, desired) -> list:
        """The desired bounds, with ``max_gpus`` raised to what the pool really holds when that is more: the
        diff then reads "update" (exceeded), never "unchanged" while a job holds more than the ceiling."""
        with self._collector() as collector:
            held = sum(job.gpus for job in collector.job_holdings())
        return [
            dataclasses.replace(o, max_gpus=math.ceil(held)) if isinstance(o, RayPoolBounds) and held > o.max_gpus
            else o
            for o in desired.objects
        ]

    def apply(self, changes) -> list[ApplyResult]:
        return [self._hold(change) for change in changes if isinstance(change.desired, RayPoolBounds)]

    def _hold(self, change) -> ApplyResult:
        now = timezone.now()
        with self._collector() as collector:
            jobs = collector.job_holdings()
        guarantees = guarantees_by_orchestrator([self.orchestrator], now)[self.orchestrator.pk]
        holdings = [Holding(job.submission_id or f"job:{job.job_id}", job.team, job.gpus, job.started_at,
                            stoppable=bool(job.submission_id) and job.status == "RUNNING")
                    for job in jobs if job.gpus > 0]
        decision = plan_ceiling(holdings, change.desired.max_gpus, guarantees, now=now.timestamp(),
                                min_runtime_s=reclaim_settings(self.orchestrator).policy.min_runtime_s)
        stopper = RayJobStop(endpoint_of(self.orchestrator), dry_run=self.dry_run)
        try:
            actions = [_action(stop.workload_id, stopper.stop(stop.workload_id)) for stop in decision.stops]
        except CollectorError as error:
            return ApplyResult(change.id, change.action, False, f"stopping a Ray job: {error}")
        finally:
            stopper.close()
        _record_ceiling(self.orchestrator, decision, actions, now, self.dry_run)
        held_after = decision.held_after
        if held_after > change.desired.max_gpus:
            return ApplyResult(change.id, change.action, bool(actions),
                               f"exceeded: holds {held_after:g} of its {change.desired.max_gpus}-GPU ceiling after "
                               f"{len(actions)} stop(s); {decision.reasons[-1]}")
        return ApplyResult(change.id, change.action, True)


def _record_ceiling(orchestrator: Orchestrator, decision: CeilingDecision, actions: list[dict], now: datetime,
                    dry_run: bool) -> None:
    if not decision.stops:
        return
    cause = f"Ray pool {orchestrator.name} held {decision.held:g} GPUs over its {decision.ceiling:g}-GPU ceiling"
    plan = ReclaimPlan(orchestrator=orchestrator, created_at=now, mode="ceiling", dry_run=dry_run,
                       state=ReclaimPlan.State.APPLIED, cause=cause, actions=actions, decided_at=now,
                       reclaims=[{"owner": "", "owner_guarantee": 0, "owner_held": 0, "request_id": "",
                                  "request_gpus": 0, "waited_s": 0, "cause": cause, "reasons": list(decision.reasons),
                                  "victims": [asdict(stop) for stop in decision.stops]}])
    stamp_author(plan, by=None, reason=cause)
    plan.save()
