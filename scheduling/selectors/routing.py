"""Where should a workload go, and why: one answer for the API (``POST /api/v1/route``) and for
``manage.py route FILE`` (a pod / Job / Volcano Job YAML or an sbatch script, read by ``engine/submissions.py``).

A read, nothing written: ``route_workload`` builds each enabled scheduler pool's snapshot
(``selectors.workloads.pool_snapshots``: nodes, queue, running work, team caps), keyed by orchestrator kind, and
asks the engine's ``route_by_start`` for the pool where the workload is predicted to start first; an explicit
scheduler (annotation ``scheduler.gpuportal.io/scheduler`` or the API's ``scheduler``) is honoured when that kind
is offered. With several orchestrators of one kind, the one with the most GPUs stands for the kind.
The calendar floors of pool policies are not yet read (``PoolSnapshot.not_before`` stays 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db.models import Sum
from django.utils import timezone

from scheduling.engine.routing import route_by_start
from scheduling.engine.startplan import StartPlans
from scheduling.engine.submissions import SCHEDULER_NAMES, WorkloadDescription
from scheduling.engine.types import Request
from scheduling.models import Orchestrator

from .engine_inputs import described_request
from .workloads import pool_snapshots

# Leave the rule's choice only to start at least an hour sooner, and only for work that ends within 4 h:
# uncapped start-first routing made Philly's waits ten times worse (docs/routing.md).
MIN_GAIN_S = 3600.0
GUEST_MAX_S = 4 * 3600.0


@dataclass(frozen=True)
class Candidate:
    pool: str
    kind: str
    predicted_wait_s: float | None
    position: int
    basis: str


@dataclass(frozen=True)
class RouteAnswer:
    orchestrator: str
    """The orchestrator kind chosen ("" when none is enabled)."""
    pool: str
    rule: str
    reasons: tuple[str, ...]
    candidates: tuple[Candidate, ...] = field(default=())


def submission_request(description: WorkloadDescription) -> Request:
    """The engine's request for a described submission (a kind the engine does not know is refused by name)."""
    return described_request(
        members=description.members, gpus_per_member=description.gpus_per_member, team=description.team,
        kind=description.kind, duration_s=description.duration_s,
        orchestrator=SCHEDULER_NAMES.get(description.scheduler, description.scheduler),
        latency_sla_ms=description.latency_sla_ms,
    )


def route_workload(description: WorkloadDescription, *, now: datetime | None = None) -> RouteAnswer:
    """The engine's answer for ``description`` over the current snapshot of every enabled scheduler pool."""
    now = now or timezone.now()
    pools = _pool_per_kind()
    snapshots = pool_snapshots(now, set(pools.values()))
    by_kind = [replace(snapshots[pk], orchestrator=kind) for kind, pk in pools.items()]
    request = submission_request(description)
    epoch = now.timestamp()
    plans = StartPlans(epoch)  # the decision's estimates are the candidates' too: one pass per pool
    decision = route_by_start(request, by_kind, now=epoch, min_gain_s=MIN_GAIN_S, guest_max_s=GUEST_MAX_S,
                              plans=plans)
    candidates = []
    for snapshot in by_kind:
        estimate = plans.estimate(request, snapshot)
        candidates.append(Candidate(snapshots[pools[snapshot.orchestrator]].orchestrator, snapshot.orchestrator,
                                    estimate.wait_s(epoch), estimate.position, estimate.basis))
    chosen = snapshots[pools[decision.orchestrator]].orchestrator if decision.orchestrator in pools else ""
    return RouteAnswer(decision.orchestrator, chosen, decision.rule, decision.reasons, tuple(candidates))


def _pool_per_kind() -> dict[str, int]:
    """For each scheduler kind, the enabled orchestrator with the most GPUs (its id)."""
    rows = (
        Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS)
        .annotate(gpus=Sum("nodes__gpu_total")).order_by("kind", "-gpus", "name")
        .values_list("kind", "pk")
    )
    chosen: dict[str, int] = {}
    for kind, pk in rows:
        chosen.setdefault(kind, pk)
    return chosen
