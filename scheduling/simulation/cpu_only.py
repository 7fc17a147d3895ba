"""Placement of CPU-only pods, which the engine refuses as invalid requests.

openb pod lists are 13% CPU-only pods; the FGD protocol places them because they consume the CPU and
memory GPU pods need. ``ClusterState.place`` rejects requests without GPUs, but ``commit`` accepts a
placement with no GPU indices and reserves its CPU and memory, so the simulator chooses the node here
and the engine still does the bookkeeping. (Reported to the engine owner as a gap.)

Rule: among nodes with enough free CPU and memory, ``first-fit`` takes the first, ``random`` a seeded
random one, and every other policy the node with the fewest free GPU milli (ties: least CPU left), so
CPU work lands where it strands the least GPU capacity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MemberAssignment, Placement, Rejection, Request, TopologyLevel


class CpuOnlyPlacer:
    """Mirrors free CPU, memory and GPU milli per node, refreshed for the nodes each commit touches."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        nodes = state.nodes()
        self.names = [node.name for node in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        # A total of 0 means "not tracked": such a node never runs out.
        unlimited = np.iinfo(np.int64).max
        self.cpu = np.array([n.cpu_milli_free if n.cpu_milli_total else unlimited for n in nodes], dtype=np.int64)
        self.mem = np.array([n.memory_mib_free if n.memory_mib_total else unlimited for n in nodes], dtype=np.int64)
        self.gpu = np.array([sum(n.free_milli()) for n in nodes], dtype=np.int64)
        self.ok = np.array([n.schedulable for n in nodes], dtype=bool)

    def refresh(self, names: Sequence[str]) -> None:
        for name in names:
            node = self.state.node(name)
            i = self.index[name]
            if node.cpu_milli_total:
                self.cpu[i] = node.cpu_milli_free
            if node.memory_mib_total:
                self.mem[i] = node.memory_mib_free
            self.gpu[i] = sum(node.free_milli())

    def place(self, request: Request, policy: str, *, seed: int) -> Placement | Rejection:
        if request.members != 1:
            return Rejection(request.id, "invalid", "CPU-only gangs are not simulated")
        fits = np.flatnonzero(self.ok & (self.cpu >= request.cpu_milli) & (self.mem >= request.memory_mib))
        if fits.size == 0:
            return Rejection(request.id, "cpu", "no node has the CPU and memory this CPU-only pod asks for")
        if policy == "first-fit":
            chosen = int(fits[0])
        elif policy == "random":
            chosen = int(fits[np.random.default_rng(seed).integers(fits.size)])
        else:
            order = np.lexsort((self.cpu[fits] - request.cpu_milli, self.gpu[fits]))
            chosen = int(fits[order[0]])
        assignment = MemberAssignment(member=0, node=self.names[chosen], gpu_indices=(), gpu_milli=0)
        return Placement(
            request_id=request.id,
            assignments=(assignment,),
            topology=TopologyLevel.NVLINK_DOMAIN,
            reasons=(f"CPU-only pod: simulator's {policy} rule chose {self.names[chosen]}",),
        )
