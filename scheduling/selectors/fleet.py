"""Nodes and pools as they are now: pool totals, what fits (rows -> engine nodes: ``selectors.engine_inputs``)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum

from scheduling.engine.fragmentation import largest_placeable
from scheduling.models import (
    CollectorRun,
    Node,
    Orchestrator,
    Workload,
)
from scheduling.selectors.engine_inputs import engine_node, node_rows

GANG_SHAPES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PoolNow:
    name: str
    kind: str
    nodes: int
    gpus_total: int
    gpus_allocated: int
    gpus_pending: int
    workloads_pending: int
    stale: bool
    last_success_at: datetime | None
    last_error: str


def pools_now() -> list[PoolNow]:
    nodes = Node.objects.values("orchestrator_id").annotate(
        count=Count("id"), total=Sum("gpu_total"), allocated=Sum("gpu_allocated")
    )
    node_totals = {row["orchestrator_id"]: row for row in nodes}
    pending = (
        Workload.objects.filter(state=Workload.State.PENDING)
        .values("orchestrator_id")
        .annotate(gpus=Sum(F("gang_size") * F("gpus_per_member")), count=Count("id"))
    )
    pending_totals = {row["orchestrator_id"]: row for row in pending}
    return [
        PoolNow(
            name=o.name,
            kind=o.get_kind_display(),
            nodes=node_totals.get(o.pk, {}).get("count", 0),
            gpus_total=node_totals.get(o.pk, {}).get("total") or 0,
            gpus_allocated=node_totals.get(o.pk, {}).get("allocated") or 0,
            gpus_pending=pending_totals.get(o.pk, {}).get("gpus") or 0,
            workloads_pending=pending_totals.get(o.pk, {}).get("count") or 0,
            stale=o.is_stale,
            last_success_at=o.last_success_at,
            last_error=o.last_error,
        )
        for o in Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS)
    ]


LARGEST_GANGS_TABLES = ("scheduling_node", "scheduling_orchestrator")  # all it reads (a test holds it to that)


def largest_gangs_now() -> dict[int, int]:
    """How many gangs of each GPU count could start right now on free GPUs."""
    return largest_placeable([engine_node(row) for row in node_rows()], GANG_SHAPES)


def owned_node_count(orchestrator: Orchestrator) -> int:
    return Node.objects.filter(orchestrator=orchestrator).count()


def fleet_capacity(gpu_model: str = "") -> int:
    """GPUs on nodes that are not down (of one model, if given): what floors and promises share."""
    nodes = Node.objects.serving()
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    return nodes.aggregate(total=Sum("gpu_total"))["total"] or 0


# --- orchestrators --------------------------------------------------------------------------------


def orchestrator_health(since: datetime) -> list[Orchestrator]:
    """Every orchestrator with its latest scrape (duration, outcome), its scrape record in the window and its
    Slurm accounting source (a freshness of its own)."""
    latest = CollectorRun.objects.filter(orchestrator=OuterRef("pk")).order_by("-started_at")
    window = Q(runs__started_at__gte=since)
    return list(
        Orchestrator.objects.annotate(
            node_count=Subquery(
                Node.objects.filter(orchestrator=OuterRef("pk"))
                .values("orchestrator")
                .annotate(c=Count("id"))
                .values("c")
            ),
            last_run_at=Subquery(latest.values("started_at")[:1]),
            last_run_ms=Subquery(latest.values("duration_ms")[:1]),
            last_run_ok=Subquery(latest.values("ok")[:1]),
            runs_in_window=Count("runs", filter=window),
            failures_in_window=Count("runs", filter=window & Q(runs__ok=False)),
            max_ms_in_window=Max("runs__duration_ms", filter=window),
        )
        .select_related("accounting_source")
        .order_by("name")
    )
