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

import numpy as np

from scheduling.engine.types import MemberAssignment, Placement, Rejection, Request, TopologyLevel
from scheduling.simulation.mirror import FleetMirror


class CpuOnlyPlacer:
    """Chooses nodes for CPU-only pods from a ``FleetMirror`` (kept fresh by the caller)."""

    def __init__(self, mirror: FleetMirror) -> None:
        self.mirror = mirror

    def place(self, request: Request, policy: str, *, seed: int) -> Placement | Rejection:
        if request.members != 1:
            return Rejection(request.id, "invalid", "CPU-only gangs are not simulated")
        mirror = self.mirror
        fits = np.flatnonzero(mirror.ok & mirror.host_mask(request))
        if fits.size == 0:
            return Rejection(request.id, "cpu", "no node has the CPU and memory this CPU-only pod asks for")
        if policy == "first-fit":
            chosen = int(fits[0])
        elif policy == "random":
            chosen = int(fits[np.random.default_rng(seed).integers(fits.size)])
        else:
            order = np.lexsort((mirror.cpu[fits] - request.cpu_milli, mirror.gpu[fits]))
            chosen = int(fits[order[0]])
        assignment = MemberAssignment(member=0, node=mirror.names[chosen], gpu_indices=(), gpu_milli=0)
        return Placement(
            request_id=request.id,
            assignments=(assignment,),
            topology=TopologyLevel.NVLINK_DOMAIN,
            reasons=(f"CPU-only pod: simulator's {policy} rule chose {mirror.names[chosen]}",),
        )
