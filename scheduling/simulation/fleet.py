"""Synthetic fleets for traces without a machine list (Philly, generic CSV) and the siloed split.

Philly's machine list is not public; its README's example server has 8 GPUs, so the default fleet is
8-GPU hosts (one NVLink domain each), 32 hosts per leaf switch, one spine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from scheduling.engine.types import Node, OrchestratorKind

GPUS_PER_NODE = 8
NODES_PER_LEAF = 32
ORCHESTRATORS = (OrchestratorKind.SLURM.value, OrchestratorKind.KUBERNETES.value, OrchestratorKind.RAY.value)


def build_fleet(capacity_gpus: int, *, gpus_per_node: int = GPUS_PER_NODE, gpu_model: str = "") -> tuple[Node, ...]:
    """``ceil(capacity / gpus_per_node)`` identical hosts with leaf-switch topology."""
    count = max(1, -(-capacity_gpus // gpus_per_node))
    return tuple(
        Node(
            name=f"n{index:05d}",
            gpu_total=gpus_per_node,
            gpu_model=gpu_model,
            nvlink_domain=f"n{index:05d}",
            leaf_switch=f"leaf{index // NODES_PER_LEAF:03d}",
            spine="spine0",
        )
        for index in range(count)
    )


def split_nodes(
    nodes: Sequence[Node], shares: Mapping[str, float], *, minimum: Mapping[str, int]
) -> dict[str, list[Node]]:
    """Partition ``nodes`` into pools sized by ``shares`` (largest remainder), each at least ``minimum``.

    Nodes are handed out in order, so each pool gets contiguous hosts (whole leaf switches where
    possible), as a real partition would.
    """
    names = [name for name in shares if shares[name] > 0 or minimum.get(name, 0) > 0]
    total_share = sum(shares[name] for name in names) or 1.0
    counts = {name: max(minimum.get(name, 0), int(len(nodes) * shares[name] / total_share)) for name in names}
    remainders = sorted(names, key=lambda name: -(len(nodes) * shares[name] / total_share % 1))
    index = 0
    while sum(counts.values()) < len(nodes):
        counts[remainders[index % len(remainders)]] += 1
        index += 1
    while sum(counts.values()) > len(nodes):
        largest = max(names, key=lambda name: counts[name] - minimum.get(name, 0))
        if counts[largest] <= minimum.get(largest, 0):
            raise ValueError(f"{len(nodes)} nodes cannot satisfy the pool minimums {dict(minimum)}")
        counts[largest] -= 1
    pools: dict[str, list[Node]] = {}
    start = 0
    for name in names:
        pools[name] = [replace(node, orchestrator=name) for node in nodes[start : start + counts[name]]]
        start += counts[name]
    return pools
