"""Fragmentation as FGD (Weng et al., USENIX ATC'23) defines it.

For one node and one member size *m*, the fragment is the free GPU capacity that a member of size *m*
cannot use there:

* a whole-GPU size ``g``: if fewer than ``g`` GPUs are wholly free, every free share on the node is a
  fragment; otherwise only the partially used GPUs' free shares are (a whole-GPU member cannot use them);
* a fractional size ``f`` (< 1 GPU): the free share of every GPU with less than ``f`` free.

A node's fragmentation is the expectation over the request-size mix, in GPUs. Two deliberate choices:
sizes larger than the node (a member of 16 GPUs on an 8-GPU host) are skipped, because that node can
never host them and calling its idle GPUs "fragmented" would make an empty fleet look fragmented; and
unschedulable nodes are skipped, because their idle GPUs are drained, not fragmented.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduling.engine.sizemix import normalised_mix
from scheduling.engine.types import MILLI_PER_GPU, Node, SizeMix

DEFAULT_SHAPES = (1, 2, 4, 8, 16, 32, 64)
MAX_GPUS_PER_MEMBER = 8


def member_fragment_milli(free: Sequence[int], size_milli: int) -> int:
    """Milli-GPUs free on a node (per-GPU free shares ``free``) that a member of ``size_milli`` cannot use."""
    if size_milli >= MILLI_PER_GPU:
        gpus = -(-size_milli // MILLI_PER_GPU)
        if gpus > len(free):
            return 0
        whole = 0
        partial = 0
        for milli in free:
            if milli >= MILLI_PER_GPU:
                whole += 1
            else:
                partial += milli
        return partial if whole >= gpus else partial + whole * MILLI_PER_GPU
    return sum(milli for milli in free if milli < size_milli)


def expected_fragment_milli(free: Sequence[int], mix: Sequence[tuple[int, float]]) -> float:
    """Expected fragment of one node, in milli-GPUs, over a normalised mix of (milli size, probability)."""
    return sum(probability * member_fragment_milli(free, size) for size, probability in mix)


def node_fragmentation(node: Node, size_mix: SizeMix) -> float:
    """GPUs on ``node`` that the mix is not expected to be able to use (0 for unschedulable nodes)."""
    if not node.schedulable:
        return 0.0
    return expected_fragment_milli(node.free_milli(), normalised_mix(size_mix)) / MILLI_PER_GPU


def fragmented_gpus(nodes: Iterable[Node], size_mix: SizeMix) -> float:
    """Fleet total of ``node_fragmentation``: free GPUs no request size in the mix can use."""
    mix = normalised_mix(size_mix)
    if not mix:
        return 0.0
    total = 0.0
    for node in nodes:
        if node.schedulable:
            total += expected_fragment_milli(node.free_milli(), mix)
    return total / MILLI_PER_GPU


def largest_placeable(nodes: Iterable[Node], shapes: Sequence[int] = DEFAULT_SHAPES) -> dict[int, int]:
    """For each gang size in ``shapes`` (GPUs), how many such gangs could start now, each counted alone.

    A gang of ``s`` GPUs is shaped as members of ``min(s, 8)`` whole GPUs (one DGX-style host each), so
    the count is a greedy ``sum(free_whole // member) // members`` within each pool: one orchestrator's nodes
    of one GPU model, since no orchestrator starts a gang on another's nodes nor mixes models in one (summed
    over the whole fleet, four free nodes here and four there read as a 64-GPU gang no one could start). It
    ignores topology and CPU/memory: an upper bound that shows which sizes fragmentation has made impossible.
    """
    pools: dict[tuple[str, str], list[int]] = defaultdict(list)
    for node in nodes:
        if node.schedulable:
            pools[(node.orchestrator, node.gpu_model)].append(node.gpu_free_whole)
    counts: dict[int, int] = {}
    for shape in shapes:
        member = min(shape, MAX_GPUS_PER_MEMBER)
        members_per_gang = -(-shape // member)
        counts[shape] = sum(sum(free // member for free in pool) // members_per_gang for pool in pools.values())
    return counts


@dataclass(frozen=True, slots=True)
class FragmentationReport:
    """Fragmentation of a fleet against a mix, per node, per NVLink domain and in total (all in GPUs)."""

    per_node: Mapping[str, float] = field(default_factory=dict)
    per_nvlink_domain: Mapping[str, float] = field(default_factory=dict)
    fragmented_gpus: float = 0.0
    free_gpus: float = 0.0
    largest_placeable: Mapping[int, int] = field(default_factory=dict)

    @property
    def fragmented_fraction(self) -> float:
        """Share of the free capacity that is fragmented (0 when nothing is free)."""
        return self.fragmented_gpus / self.free_gpus if self.free_gpus else 0.0


def fragmentation_report(nodes: Sequence[Node], size_mix: SizeMix) -> FragmentationReport:
    mix = normalised_mix(size_mix)
    per_node: dict[str, float] = {}
    per_domain: dict[str, float] = defaultdict(float)
    free_total = 0
    for node in nodes:
        if not node.schedulable:
            continue
        free = node.free_milli()
        free_total += sum(free)
        fragment = expected_fragment_milli(free, mix) / MILLI_PER_GPU if mix else 0.0
        per_node[node.name] = fragment
        per_domain[node.nvlink_domain or node.name] += fragment
    return FragmentationReport(
        per_node=per_node,
        per_nvlink_domain=dict(per_domain),
        fragmented_gpus=sum(per_node.values()),
        free_gpus=free_total / MILLI_PER_GPU,
        largest_placeable=largest_placeable(nodes),
    )
