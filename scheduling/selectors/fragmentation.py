"""Fragmentation now: free GPUs that no observed request size can use, per node and domain."""

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Sum

from scheduling.engine.fragmentation import fragmentation_report
from scheduling.models import (
    Workload,
)
from scheduling.selectors.engine_inputs import engine_node, node_rows

# --- fragmentation --------------------------------------------------------------------------------

DEFAULT_MIX = {1.0: 1.0, 2.0: 1.0, 4.0: 1.0, 8.0: 1.0}


@dataclass(frozen=True)
class NodeCell:
    name: str
    orchestrator: str
    gpu_model: str
    leaf_switch: str
    nvlink_domain: str
    gpu_total: int
    gpu_allocated: int
    schedulable: bool
    fragment: float


@dataclass(frozen=True)
class DomainFragmentation:
    nvlink_domain: str
    leaf_switch: str
    gpu_total: int
    free: int
    unusable: float


@dataclass(frozen=True)
class FragmentationNow:
    nodes: list[NodeCell]
    domains: list[DomainFragmentation]
    fragmented_gpus: float
    free_gpus: float
    placeable: dict[int, int]
    size_mix: dict[float, float]
    mix_observed: bool


def observed_size_mix() -> tuple[dict[float, float], bool]:
    """Members per GPUs-per-member over running and pending work (FGD weighs members, not jobs)."""
    rows = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES)
        .values("gpus_per_member")
        .annotate(members=Sum("gang_size"))
        .values_list("gpus_per_member", "members")
    )
    mix = {float(gpus): float(members) for gpus, members in rows if gpus}
    return (mix, True) if mix else (dict(DEFAULT_MIX), False)


def fragmentation_now() -> FragmentationNow:
    rows = node_rows()
    nodes = [engine_node(row) for row in rows]
    mix, observed = observed_size_mix()
    report = fragmentation_report(nodes, mix)
    cells = [
        NodeCell(
            n.name,
            n.orchestrator,
            n.gpu_model,
            n.leaf_switch,
            n.nvlink_domain,
            n.gpu_total,
            n.gpu_allocated,
            n.schedulable,
            report.per_node.get(n.name, 0.0),
        )
        for n in nodes
    ]
    domains: dict[str, list[NodeCell]] = defaultdict(list)
    for cell in cells:
        domains[cell.nvlink_domain or cell.name].append(cell)
    per_domain = [
        DomainFragmentation(
            name,
            members[0].leaf_switch,
            sum(c.gpu_total for c in members),
            sum(c.gpu_total - c.gpu_allocated for c in members if c.schedulable),
            report.per_nvlink_domain.get(name, 0.0),
        )
        for name, members in domains.items()
    ]
    per_domain.sort(key=lambda d: (-d.unusable, d.nvlink_domain))
    return FragmentationNow(
        cells, per_domain, report.fragmented_gpus, report.free_gpus, dict(report.largest_placeable), mix, observed
    )
