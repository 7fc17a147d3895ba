"""Topology keys per node: which NVLink domain, leaf switch and spine a node sits in.

A missing level is never assumed to be shared: a node without a ``leaf_switch`` is its own leaf (keyed
by the level below), so a hard "one leaf switch" request is only met where locality is actually known.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.engine.types import Node, TopologyLevel

# Tightest first: the order in which a gang's placement is attempted.
LEVELS: tuple[TopologyLevel, ...] = (
    TopologyLevel.NVLINK_DOMAIN,
    TopologyLevel.LEAF_SWITCH,
    TopologyLevel.SPINE,
    TopologyLevel.ANY,
)


def level_rank(level: TopologyLevel) -> int:
    return LEVELS.index(level)


def topology_keys(nodes: Sequence[Node]) -> dict[TopologyLevel, list[str]]:
    """For each level, the group key of every node; ANY puts all nodes in one group."""
    nvlink = [node.nvlink_domain or f"node:{node.name}" for node in nodes]
    leaf = [node.leaf_switch or nvlink[i] for i, node in enumerate(nodes)]
    spine = [node.spine or leaf[i] for i, node in enumerate(nodes)]
    return {
        TopologyLevel.NVLINK_DOMAIN: nvlink,
        TopologyLevel.LEAF_SWITCH: leaf,
        TopologyLevel.SPINE: spine,
        TopologyLevel.ANY: [""] * len(nodes),
    }
