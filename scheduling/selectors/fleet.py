"""Nodes and pools as they are now: ORM rows -> engine nodes, pool totals, what fits."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum

from scheduling.engine.fragmentation import largest_placeable
from scheduling.engine.types import MILLI_PER_GPU
from scheduling.engine.types import Node as EngineNode
from scheduling.models import (
    CollectorRun,
    Node,
    Orchestrator,
    Workload,
)

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


def engine_nodes(nodes=None, *, unmovable: frozenset[int] = frozenset()) -> tuple[EngineNode, ...]:
    """The fleet (or the ``nodes`` queryset, in its own order) as the engine sees it; a node's allocated GPUs
    are its lowest indices, and the pks in ``unmovable`` (nodes already in an open plan) are held where they are
    (pinned: not moved twice) while still counted in their pool: until its drain starts, such a node serves and
    its orchestrator owns it (the overview counts it; the rebalancer once dropped it, and the pages disagreed)."""
    return tuple(engine_node(row[1:], in_plan=row[0] in unmovable) for row in node_rows(nodes, with_pk=True))


LARGEST_GANGS_TABLES = ("scheduling_node", "scheduling_orchestrator")  # all it reads (a test holds it to that)


def largest_gangs_now() -> dict[int, int]:
    """How many gangs of each GPU count could start right now on free GPUs."""
    return largest_placeable([engine_node(row) for row in node_rows()], GANG_SHAPES)


_NODE_FIELDS = ("name", "gpu_total", "gpu_model", "gpu_allocated", "nvlink_domain", "leaf_switch", "spine")


def node_rows(nodes=None, *, with_pk: bool = False) -> list[tuple]:
    """The rows ``engine_node`` reads: every node by topology, or the ``nodes`` queryset in its own order."""
    if nodes is None:
        nodes = Node.objects.order_by("leaf_switch", "nvlink_domain", "name")
    fields = ("pk",) * with_pk + (*_NODE_FIELDS, "orchestrator__name", "pinned", "state")
    return list(nodes.values_list(*fields))


def engine_node(row: tuple, allocated: int | None = None, *, in_plan: bool = False) -> EngineNode:
    """The one ORM -> engine translation of a node (a ``node_rows`` row); ``in_plan``: the node is in an open
    rebalance plan, so the rebalancer may not move it again (its state says whether it takes work)."""
    name, total, model, alloc, domain, leaf, spine, orch, pinned, state = row
    used = min(total, alloc if allocated is None else allocated)
    return EngineNode(
        name=name,
        gpu_total=total,
        gpu_model=model,
        gpu_free_milli=(0,) * used + (MILLI_PER_GPU,) * (total - used),
        nvlink_domain=domain,
        leaf_switch=leaf,
        spine=spine,
        orchestrator=orch,
        pinned=pinned or in_plan,
        schedulable=state not in Node.UNSCHEDULABLE,
    )


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
