"""Routing: which orchestrator should run a workload, by explainable rules (first match wins).

1. an explicit orchestrator on the request (an annotation) wins when that orchestrator is available;
2. inference or a latency SLA -> Kubernetes (services, HPA), else Ray (Serve), else Slurm;
3. a multi-node gang (more GPUs than one node holds) or a run longer than ``LONG_RUN_S`` -> Slurm
   (gang scheduling, topology, backfill), else Kubernetes with Volcano gangs, else Ray;
4. hyperparameter trials, or a single short GPU task -> Ray (thousands of short elastic tasks),
   else Kubernetes, else Slurm;
5. otherwise training -> Slurm, then Kubernetes; batch -> Kubernetes, then Slurm; Ray last.

Inference is tested before duration because a service runs "forever" and still belongs on Kubernetes.
Every decision lists the rule and each fallback taken.

``route_by_start`` goes one step further when policy lets several orchestrators run a workload: each
candidate pool's snapshot predicts when the workload would start there (``startplan.estimate_start``:
the team's cap, EASY backfill, the pool's calendar floor) and the earliest start wins; ties, and the
case where no start can be predicted anywhere, go to the rule's preference. The reasons carry every
candidate's predicted wait.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set

from scheduling.engine.startplan import PoolSnapshot, StartEstimate, StartPlans, describe_wait
from scheduling.engine.types import OrchestratorKind, Request, RoutingDecision, WorkloadKind

GPUS_PER_NODE = 8
LONG_RUN_S = 4 * 3600.0
SHORT_TASK_S = 3600.0

SLURM = OrchestratorKind.SLURM.value
KUBERNETES = OrchestratorKind.KUBERNETES.value
RAY = OrchestratorKind.RAY.value
SERVING = frozenset({KUBERNETES, RAY})


def route(workload: Request, *, available: Set[str]) -> RoutingDecision:
    """The orchestrator for ``workload`` among ``available`` ("" when none is available), with reasons."""
    if not available:
        return RoutingDecision("", ("no orchestrator is available",), "none")
    notes: list[str] = []
    if workload.orchestrator:
        if workload.orchestrator in available:
            return RoutingDecision(workload.orchestrator,
                                   (f"explicitly requested {workload.orchestrator}",), "explicit")
        notes.append(f"requested {workload.orchestrator} is not available; routing by rules")
    rule, why, preference = _rule_for(workload)
    return _first_available(rule, [*notes, why], preference, available)


def _rule_for(workload: Request) -> tuple[str, str, Sequence[str]]:
    gpus = workload.gpus
    duration = workload.duration_estimate_s
    if workload.kind is WorkloadKind.INFERENCE or workload.latency_sla_ms is not None:
        sla = f" (latency SLA {workload.latency_sla_ms:g} ms)" if workload.latency_sla_ms is not None else ""
        return "serving", f"inference{sla} belongs on a service platform", (KUBERNETES, RAY, SLURM)
    if gpus > GPUS_PER_NODE or workload.gpus_per_member > GPUS_PER_NODE:
        return "multi-node", f"a {gpus:g}-GPU gang spans nodes: needs gang and topology scheduling", (
            SLURM, KUBERNETES, RAY)
    if duration > LONG_RUN_S:
        return "long-run", f"runs {duration / 3600:.1f} h (> {LONG_RUN_S / 3600:g} h): batch scheduler with backfill", (
            SLURM, KUBERNETES, RAY)
    if workload.kind is WorkloadKind.HPO:
        return "trials", "hyperparameter trials are many short elastic tasks", (RAY, KUBERNETES, SLURM)
    if gpus <= 1 and 0 < duration <= SHORT_TASK_S:
        return "short-task", f"a single-GPU task of {duration / 60:.0f} min suits Ray's task scheduling", (
            RAY, KUBERNETES, SLURM)
    if workload.kind is WorkloadKind.TRAINING:
        return "training", "training that fits one node: batch scheduler first", (SLURM, KUBERNETES, RAY)
    return "batch", "batch work that fits one node: Kubernetes batch first", (KUBERNETES, SLURM, RAY)


def _first_available(rule: str, reasons: list[str], preference: Sequence[str], available: Set[str]) -> RoutingDecision:
    for rank, orchestrator in enumerate(preference):
        if orchestrator in available:
            if rank:
                skipped = ", ".join(preference[:rank])
                reasons.append(f"{skipped} unavailable: falling back to {orchestrator}")
            return RoutingDecision(orchestrator, tuple(reasons), rule)
    other = sorted(available)[0]
    reasons.append(f"none of {', '.join(preference)} is available: using {other}")
    return RoutingDecision(other, tuple(reasons), rule)


def preference(workload: Request) -> tuple[str, ...]:
    """The rule's order of orchestrators for ``workload`` (most suitable first)."""
    return tuple(_rule_for(workload)[2])


def route_by_start(
    workload: Request, pools: Sequence[PoolSnapshot], *, now: float, home: str = "", min_gain_s: float = 0.0,
    guest_max_s: float | None = None, plans: StartPlans | None = None,
) -> RoutingDecision:
    """The pool (among ``pools``: the ones policy allows) where ``workload`` is predicted to start first.

    An explicit, allowed orchestrator still wins; inference only weighs the service platforms (Kubernetes,
    Ray) when one is offered. The rule's preference breaks ties (within a minute) and decides when no
    candidate has a predictable start.

    ``home`` is the caller's rule-only choice when it has its own (a team's usual orchestrator): it stands
    for the rule, and another pool wins only by starting more than ``min_gain_s`` earlier.

    ``guest_max_s``: only work expected to end within this many seconds may leave the rule's choice. A
    start-first router is myopic: a week-long job that starts "now" in another pool holds it for a week and
    everything routed there after it waits (on Philly, uncapped routing by start made the mean wait ten
    times worse; capped at 4 h it cut the mean by a third and p95 by two thirds: docs/routing.md).

    ``plans``: a caller routing many workloads against the same snapshots at one moment passes one
    ``StartPlans(now)``, so each pool's backfill pass is computed once for the whole stream.
    """
    by_name = {pool.orchestrator: pool for pool in pools}
    ruled = route(workload, available=by_name.keys())
    if ruled.rule in ("explicit", "none"):
        return ruled
    if ruled.rule == "serving" and by_name.keys() & SERVING:
        pools = [pool for pool in pools if pool.orchestrator in SERVING]  # a service never goes to a batch queue
    if home in {pool.orchestrator for pool in pools}:
        ruled = RoutingDecision(home, (f"{home} is the workload's home orchestrator",), "home")
    if guest_max_s is not None and not 0 < workload.duration_estimate_s <= guest_max_s \
            and ruled.orchestrator in {pool.orchestrator for pool in pools}:
        length = f"runs {workload.duration_estimate_s / 3600:.1f} h" if workload.duration_estimate_s else "no run time"
        ruled = RoutingDecision(ruled.orchestrator, (*ruled.reasons, f"{length}: only work ending within"
                                f" {guest_max_s / 3600:g} h may go elsewhere"), ruled.rule)
        pools = [pool for pool in pools if pool.orchestrator == ruled.orchestrator]
    order = {name: rank for rank, name in enumerate(preference(workload))}
    plans = _plans_at(plans, now)
    estimates = sorted((plans.estimate(workload, pool) for pool in pools),
                       key=lambda e: (_start_key(e, now), order.get(e.orchestrator, len(order)), e.orchestrator))
    reasons = [*ruled.reasons, *(_candidate_reason(e, now) for e in estimates)]
    best = estimates[0]
    stay = next((e for e in estimates if e.orchestrator == ruled.orchestrator), None)
    if stay is not None and stay.start_at is not None and best.start_at is not None \
            and stay.start_at - best.start_at <= min_gain_s:
        best = stay  # not enough to gain by leaving the rule's choice
    if best.start_at is None:
        reasons.append(f"no candidate has a predictable start: keeping the rule's choice {ruled.orchestrator}")
        return RoutingDecision(ruled.orchestrator, tuple(reasons), ruled.rule)
    if best.orchestrator == ruled.orchestrator:
        reasons.append(f"{best.orchestrator} is the rule's choice and predicted to start first")
    else:
        reasons.append(f"{best.orchestrator} predicted to start first (rule preferred {ruled.orchestrator})")
    return RoutingDecision(best.orchestrator, tuple(reasons), "predicted-start")


def earliest_pool(
    workload: Request, pools: Sequence[PoolSnapshot], *, now: float, plans: StartPlans | None = None,
) -> RoutingDecision:
    """Among pools of one orchestrator (say two Kubernetes node pools, both able to run a pod), the one where
    ``workload`` is predicted to start first; ties (within a minute) and unpredictable starts go to the first
    pool given (the caller's default). The reasons carry every candidate's predicted wait, earliest first.

    No rule and no guard here: the pools are alike, so a pool that starts the work sooner is simply better
    (``route_by_start``'s guards weigh leaving one orchestrator for another)."""
    if not pools:
        return RoutingDecision("", ("no pool is available",), "none")
    rank = {pool.orchestrator: index for index, pool in enumerate(pools)}
    plans = _plans_at(plans, now)
    estimates = sorted((plans.estimate(workload, pool) for pool in pools),
                       key=lambda e: (_start_key(e, now), rank[e.orchestrator]))
    reasons = [_candidate_reason(e, now) for e in estimates]
    best, default = estimates[0], pools[0].orchestrator
    if best.start_at is None:
        reasons.append(f"no pool has a predictable start: {default}, the default")
        return RoutingDecision(default, tuple(reasons), "default")
    reasons.append(f"{best.orchestrator}: predicted to start first" if len(pools) > 1 else
                   f"{best.orchestrator}: the only pool")
    return RoutingDecision(best.orchestrator, tuple(reasons), "predicted-start")


def _start_key(estimate: StartEstimate, now: float) -> float:
    """Start time rounded to the minute, so near-ties fall to the rule's preference."""
    wait = estimate.wait_s(now)
    return math.inf if wait is None else float(wait // 60)


def _candidate_reason(estimate: StartEstimate, now: float) -> str:
    wait = describe_wait(estimate.wait_s(now))
    starts = "starts now" if wait == "now" else f"starts in {wait}" if wait != "unknown" else "start unknown"
    behind = f" behind {estimate.ahead} queued ({estimate.ahead_gpus:g} GPUs)" if estimate.ahead else ""
    return f"{estimate.orchestrator}: {starts}{behind} [{estimate.basis}]"


def _plans_at(plans: StartPlans | None, now: float) -> StartPlans:
    if plans is None:
        return StartPlans(now)
    if plans.now != now:
        raise ValueError(f"start plans made for t={plans.now:g} asked at t={now:g}: a plan is for one moment")
    return plans
