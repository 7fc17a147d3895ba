"""Keep every guarantee: each round, per orchestrator, the engine's reclaim decision becomes a plan (review),
is applied at once (auto) or is left to the orchestrator's own reclaim (native: Slurm QOS preemption, Volcano;
where there is none, Ray and Kubernetes without Volcano, the portal applies it as in auto mode and the plan says so);
docs/governance.md, "Reclaim".

Applying stops each victim with the orchestrator's lever (``collectors/reclaim_actuators.py``): Slurm requeue,
the Kubernetes Eviction API (PodDisruptionBudgets hold), Ray job stop. Every plan keeps its cause (the owner,
its guarantee, what waited) and each action's result; its history rows say who decided and why.
"""

from __future__ import annotations

import dataclasses
import logging
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
from scheduling.collectors.slurm_preemption import SlurmPreemptionWriter, preempt_type
from scheduling.engine.governance_types import KUEUE_RECLAIM_ANY, NativeKind, RayPoolBounds
from scheduling.engine.reclaim import (
    CeilingDecision,
    Holding,
    ReclaimDecision,
    ReclaimPolicy,
    plan_ceiling,
    plan_reclaims,
)
from scheduling.engine.slurm_preemption import DEFAULT_BORROW_QOS, preemption_design
from scheduling.models import AppliedObject, Orchestrator, ReclaimPlan, Team, Workload
from scheduling.rules import is_portal_admin
from scheduling.selectors.reclaim import guarantees_by_orchestrator, open_plans, reclaim_inputs
from scheduling.services import leases, notifications, versions
from scheduling.services.audit import require_reason, stamp_author
from scheduling.services.orchestrators import (
    endpoint_of,
    governance_options,
    kubernetes_api,
    option,
    slurm_accounting_access,
)
from scheduling.services.orchestrators import teams_of as orchestrator_teams
from scheduling.wording import plural

log = logging.getLogger(__name__)

MODES = ("off", "native", "review", "auto")
DEFAULT_MODE = "review"


@dataclass(frozen=True)
class ReclaimSettings:
    mode: str
    policy: ReclaimPolicy
    dry_run: bool = False
    eviction_grace_s: int | None = None
    borrow_qos: str = DEFAULT_BORROW_QOS  # Slurm native mode: the QOS borrowed work runs in


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
        borrow_qos=str(options.get("borrow_qos", DEFAULT_BORROW_QOS)),
    )


RECLAIM_KINDS = (Orchestrator.Kind.SLURM, Orchestrator.Kind.KUBERNETES, Orchestrator.Kind.RAY)


def native_lever(orchestrator: Orchestrator) -> str:
    """The orchestrator's own reclaim that *native* mode leaves the work to, "" when it has none (the portal then
    reclaims itself, as in auto mode, and the plan says so): slurmctld requeues a borrower's job when an owner's
    job arrives through the preemption QOSes the round writes (``_prepare_slurm``; docs/governance.md, "Native
    reclaim on Slurm"); Kueue for a ClusterQueue with ``reclaimWithinCohort: Any`` (governance writes it in native
    mode); Volcano reclaims for a queue below its ``guarantee``. Ray and plain Kubernetes have none."""
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        return "Slurm QOS preemption (preempt/qos, PreemptMode=REQUEUE)"
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES and orchestrator.pk and _kueue_queues(orchestrator).exists():
        return KUEUE_LEVER
    volcano = bool(governance_options(orchestrator).get("volcano", True))
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES and volcano:
        return "Volcano's reclaim action"
    return ""


KUEUE_LEVER = "Kueue's reclaimWithinCohort"


def _kueue_queues(orchestrator: Orchestrator):
    """The Kueue ClusterQueues governance last wrote there (a Kubernetes cluster that runs Kueue has some)."""
    return AppliedObject.objects.filter(orchestrator=orchestrator, kind=NativeKind.KUEUE_CLUSTER_QUEUE.value)


def native_fallback_note(orchestrator: Orchestrator, why: str = "") -> str:
    kind = orchestrator.get_kind_display() if orchestrator.kind != Orchestrator.Kind.KUBERNETES else (
        "Kubernetes without Volcano")
    return f"native mode: {why or kind + ' has no native reclaim'}, so the portal reclaimed itself (as in auto mode)"


@dataclass(frozen=True)
class NativeSetup:
    """What native mode found this round: ``problem`` "" when the orchestrator's own reclaim is in force (else
    why not: the portal then reclaims itself), and the writes that keep it configured (Slurm's QOSes)."""

    problem: str = ""
    commands: tuple[str, ...] = ()


def prepare_native(orchestrator: Orchestrator, guarantees: dict[str, float], settings: ReclaimSettings) -> NativeSetup:
    if not native_lever(orchestrator):
        return NativeSetup(native_fallback_note(orchestrator))
    if orchestrator.kind != Orchestrator.Kind.SLURM:
        return NativeSetup()
    return _prepare_slurm(orchestrator, guarantees, settings)


def _prepare_slurm(orchestrator: Orchestrator, guarantees: dict[str, float], settings: ReclaimSettings) -> NativeSetup:
    """Write the preemption QOSes from this round's guarantees (``engine/slurm_preemption.py``), once slurmctld is
    seen to preempt by QOS; a cluster that does not (its slurm.conf is the site's) is reclaimed by the portal."""
    run, cluster, env = slurm_accounting_access(orchestrator)
    try:
        preempting = preempt_type(env)
        if preempting != "preempt/qos":
            return NativeSetup(native_fallback_note(
                orchestrator, f"slurmctld's PreemptType is {preempting}, not preempt/qos"))
        design = preemption_design(guarantees, Team.objects.values_list("slug", flat=True),
                                   borrow_qos=settings.borrow_qos, min_runtime_s=settings.policy.min_runtime_s)
        commands = SlurmPreemptionWriter(run, cluster, dry_run=settings.dry_run).apply(design)
    except CollectorError as error:
        return NativeSetup(native_fallback_note(orchestrator, f"the preemption QOSes could not be written ({error})"))
    return NativeSetup("", tuple(commands))


def reclaiming_orchestrators() -> list[Orchestrator]:
    candidates = Orchestrator.objects.filter(enabled=True, kind__in=RECLAIM_KINDS)
    return [o for o in candidates if not o.endpoint.startswith("demo://") and reclaim_settings(o).mode != "off"]


def reclaim_round(orchestrator_id: int, now: datetime | None = None) -> ReclaimPlan | None:
    """One round on one orchestrator: decide, then store (review), apply (auto; native without a native lever)
    or record (native). None when no team below its guarantee waits on borrowed GPUs there."""
    now = now or timezone.now()
    orchestrator = Orchestrator.objects.get(pk=orchestrator_id)
    settings = reclaim_settings(orchestrator)
    if settings.mode == "off" or orchestrator.kind not in RECLAIM_KINDS:
        return None
    # One round per orchestrator at a time: rounds a worker outage queued up would each store (auto: apply) a plan.
    with leases.round_lease(f"reclaim {orchestrator.pk}", leases.outliving("default")) as token:
        if token is None:
            log.info("reclaim round on %s skipped: another holds its lease", orchestrator.name)
            return None
        return _reclaim_round(orchestrator, settings, now)


def _reclaim_round(orchestrator: Orchestrator, settings: ReclaimSettings, now: datetime) -> ReclaimPlan | None:
    inputs = reclaim_inputs(orchestrator)
    guarantees = guarantees_by_orchestrator([orchestrator], now)[orchestrator.pk]
    native = prepare_native(orchestrator, guarantees, settings) if settings.mode == "native" else NativeSetup()
    decision = plan_reclaims(inputs.nodes, inputs.running, inputs.pending, guarantees, now=now.timestamp(),
                             policy=settings.policy)
    if not decision.reclaims:
        if native.commands:
            _record_native_setup(orchestrator, native, settings, now)
        return None
    plan = _store(orchestrator, decision, settings, now, native)
    if plan.state == ReclaimPlan.State.APPROVED:
        slurm_native = settings.mode == "native" and not native.problem
        return apply_reclaim_plan(plan.pk, _native_slurm_stopper(settings.borrow_qos) if slurm_native else None)
    return plan


@transaction.atomic
def _store(orchestrator: Orchestrator, decision: ReclaimDecision, settings: ReclaimSettings,
           now: datetime, native: NativeSetup) -> ReclaimPlan:
    """The round's plan; a newer decision supersedes a plan nobody decided yet (it may name victims that ended)."""
    superseded = 0
    for stale in open_plans(orchestrator).filter(state=ReclaimPlan.State.PENDING).select_for_update():
        stamp_author(stale, by=None, reason="superseded by a newer reclaim decision")
        stale.state = ReclaimPlan.State.SUPERSEDED
        stale.save()
        superseded += 1
    state, reason = _disposition(orchestrator, settings.mode, native, decision)
    plan = ReclaimPlan(
        orchestrator=orchestrator, created_at=now, mode=settings.mode, dry_run=settings.dry_run, state=state,
        reclaims=[_reclaim_document(reclaim) for reclaim in decision.reclaims],
        passed=[asdict(claim) for claim in decision.passed],
        cause="; ".join(reclaim.cause for reclaim in decision.reclaims),
        decided_at=now if state != ReclaimPlan.State.PENDING else None,
        reason=reason, actions=_setup_actions(native, settings),
    )
    stamp_author(plan, by=None, reason=plan.cause[:1000] or "reclaim")
    plan.save()
    if state == ReclaimPlan.State.PENDING and not superseded:  # told once, not at every round that renews it
        transaction.on_commit(lambda: notifications.reclaim_plan_waiting(plan))
    return plan


def _disposition(orchestrator: Orchestrator, mode: str, native: NativeSetup, decision: ReclaimDecision
                 ) -> tuple[str, str]:
    """The new plan's state and the reason it records: review waits for an admin; auto is applied at once;
    native is left to the orchestrator's own reclaim, or applied by the portal where there is none."""
    if mode == "auto":
        return ReclaimPlan.State.APPROVED, "auto mode"
    if mode == "native":
        if native.problem:
            return ReclaimPlan.State.APPROVED, native.problem
        if orchestrator.kind == Orchestrator.Kind.SLURM:
            return ReclaimPlan.State.APPROVED, (
                "native mode: jobs in the borrow QOS are left to slurmctld's preemption; a borrower in another QOS "
                "(submitted before native reclaim, or with --qos) cannot be preempted by it and is requeued by the "
                "portal")
        lever = native_lever(orchestrator)
        detail = f" ({kueue_reclaim(orchestrator, decision)})" if lever == KUEUE_LEVER else ""
        return (ReclaimPlan.State.NATIVE,
                f"native mode: left to {lever}{detail}; recorded, nothing stopped by the portal")
    return ReclaimPlan.State.PENDING, ""


def _setup_actions(native: NativeSetup, settings: ReclaimSettings) -> list[dict]:
    return [{"victim": "", "verb": "qos", "changed": True, "dry_run": settings.dry_run, "request": command,
             "message": "native reclaim's QOS written" if not settings.dry_run else "dry run: QOS not written"}
            for command in native.commands]


def _record_native_setup(orchestrator: Orchestrator, native: NativeSetup, settings: ReclaimSettings,
                         now: datetime) -> None:
    """The QOS writes of a round that reclaimed nothing, audited like a plan (the reclaim page lists it)."""
    cause = f"native reclaim on {orchestrator.name}: preemption QOSes written from this round's guarantees"
    plan = ReclaimPlan(orchestrator=orchestrator, created_at=now, mode="native", dry_run=settings.dry_run,
                       state=ReclaimPlan.State.NATIVE, cause=cause, decided_at=now, reason=cause,
                       actions=_setup_actions(native, settings))
    stamp_author(plan, by=None, reason=cause)
    plan.save()


def kueue_reclaim(orchestrator: Orchestrator, decision: ReclaimDecision) -> str:
    """For each owner, whether Kueue takes the borrowed GPUs back, from what the portal last wrote: yes where its
    ClusterQueue carries ``reclaimWithinCohort: Any``; nobody where it does not (yet: the next governance round
    writes it). Said in the plan, so nobody reads "native" as "done" where no native reclaim is in force."""
    owners = sorted({reclaim.owner for reclaim in decision.reclaims})
    queues = {settings["name"]: settings for settings in _kueue_queues(orchestrator).values_list("settings", flat=True)}
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
    return "; ".join(said)


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
def approve_reclaim_plan(plan_id: int, *, by, reason: str, seen_version: int | None = None) -> ReclaimPlan:
    return _decide(plan_id, ReclaimPlan.State.APPROVED, by=by, reason=reason, seen_version=seen_version)


@transaction.atomic
def reject_reclaim_plan(plan_id: int, *, by, reason: str, seen_version: int | None = None) -> ReclaimPlan:
    return _decide(plan_id, ReclaimPlan.State.REJECTED, by=by, reason=reason, seen_version=seen_version)


def _decide(plan_id: int, state: str, *, by, reason: str, seen_version: int | None) -> ReclaimPlan:
    """``seen_version``: the plan as the decider's page or If-Match showed it; a plan changed since (superseded
    by a newer round) is refused naming who changed what, when (services/versions.py)."""
    _require_admin(by)
    reason = require_reason(reason)
    plan = ReclaimPlan.objects.select_for_update().get(pk=plan_id)
    versions.require_version(plan, seen_version, f"Reclaim plan #{plan.pk}")
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
        plan.actions, plan.error = [*plan.actions, *actions], "; ".join(errors)
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
    if orchestrator.kind == Orchestrator.Kind.RAY:
        return lambda submission_id: [_stop_ray_job(orchestrator, submission_id, dry_run)]
    raise ValidationError({"kind": f"no reclaim lever for {orchestrator.kind} orchestrators"})


def _native_slurm_stopper(borrow_qos: str):
    """Native mode on Slurm: a victim running in the borrow QOS is slurmctld's to preempt (the portal leaves it);
    one in another QOS is not preemptible by slurmctld, so the portal requeues it as in auto mode."""
    def stopper(orchestrator: Orchestrator, dry_run: bool):
        requeue = victim_stopper(orchestrator, dry_run)
        slurm_conf = option(orchestrator, "slurm_conf")
        reader = SlurmRequeue(env={"SLURM_CONF": slurm_conf} if slurm_conf else None)

        def stop(job: str) -> list[ActionResult]:
            qos = reader.job_qos(job)
            if qos == borrow_qos:
                return [ActionResult("leave", job, dry_run, False, "",
                                     f"job {job} runs in {qos}: left to slurmctld's preemption")]
            return requeue(job)

        return stop

    return stopper


def _stop_ray_job(orchestrator: Orchestrator, submission_id: str, dry_run: bool) -> ActionResult:
    """The Jobs API's stop, the lever the pool ceiling pulls too (``RayPool``): the whole job, every group,
    task and actor of it (reclaim_inputs makes them one gang)."""
    stopper = RayJobStop(endpoint_of(orchestrator), dry_run=dry_run)
    try:
        return stopper.stop(submission_id)
    finally:
        stopper.close()


# ------------------------------------------------------------------------------------------- Ray's ceiling


@dataclass
class RayPool:
    """Governance of a Ray pool (a ``Cluster`` of collectors/governance_clusters.py). Ray has no per-team quota, so
    team caps there are observed, not enforced; the pool ceiling (``RayPoolBounds.max_gpus``) is read back from what the
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
        try:
            actions = [_action(stop.workload_id, _stop_ray_job(self.orchestrator, stop.workload_id, self.dry_run))
                       for stop in decision.stops]
        except CollectorError as error:
            return ApplyResult(change.id, change.action, False, f"stopping a Ray job: {error}")
        _record_ceiling(self.orchestrator, decision, actions, now, self.dry_run)
        held_after = decision.held_after
        if held_after > change.desired.max_gpus:
            return ApplyResult(change.id, change.action, bool(actions),
                               f"exceeded: holds {held_after:g} of its {change.desired.max_gpus}-GPU ceiling after "
                               f"{plural(len(actions), 'stop')}; {decision.reasons[-1]}")
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
