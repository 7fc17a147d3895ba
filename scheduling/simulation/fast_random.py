"""Prototype of an engine fast path: ``random`` placement of one-member requests, decision for decision.

Why: ``ClusterState.place(request, "random")`` has no single-member fast path, so every pod goes
through ``_place_general``, whose ``_slots`` computes GPU and host slots for every candidate node in
Python; on openb (1,213 nodes, ~8,000 pods) that is 75% of a 23 s (CPU) packing run.

What the engine decides for one member with ``random`` when every node is its own NVLink domain:
the eligible nodes (schedulable, allowed model, one member's GPUs free, CPU and memory for it) in node
order form the feasible NVLink groups; it draws ``rng.choice(feasible)`` with
``rng = random.Random(f"{seed}:{request.id}")`` (a one-node group consumes no further randomness);
inside the node a share goes to the fullest GPU that fits, whole GPUs to the lowest free indices.
``RandomSinglePlacer`` reproduces exactly that with vector operations over a ``FleetMirror``, and
falls back to the engine for everything else (gangs, invalid requests, shared NVLink domains).
``tests/simulation/test_fast_random.py`` checks it against the engine on random fleets, and
``run_packing(..., verify=True)`` checks every decision of a run.

The engine change this stands for (to replace this module): in ``ClusterState.place``, route
``members == 1`` and ``policy == "random"`` to a path that counts eligible nodes from the buckets
(whole shapes: ``(model, whole >= gpus)`` buckets; shares: signatures with ``sig[-1] >= milli``) and
indexes the k-th one, instead of building ``_slots`` for the whole fleet.
"""

from __future__ import annotations

import random

import numpy as np

from scheduling.engine.placement import ClusterState, invalid_request
from scheduling.engine.types import MILLI_PER_GPU, MemberAssignment, Placement, Rejection, Request, TopologyLevel
from scheduling.simulation.mirror import FleetMirror

REASON = "random: 1 member on 1 node inside one nvlink domain"  # the engine's own wording


class RandomSinglePlacer:
    def __init__(self, state: ClusterState, mirror: FleetMirror) -> None:
        self.state = state
        self.mirror = mirror
        nodes = state.nodes()
        domains = {node.nvlink_domain or f"node:{node.name}" for node in nodes}
        self.applies = len(domains) == len(nodes)

    def place(self, request: Request, *, seed: int) -> Placement | Rejection:
        if not self.applies or request.members != 1 or invalid_request(request):
            return self.state.place(request, "random", seed=seed)
        mirror = self.mirror
        if request.gpu_models and not any(m in mirror.model_ids for m in request.gpu_models):
            return self.state.place(request, "random", seed=seed)  # the engine names the missing model
        shared = bool(request.gpu_milli)
        gpu_ok = (mirror.largest >= request.gpu_milli) if shared else (mirror.whole >= request.gpus_per_member)
        eligible = np.flatnonzero(mirror.model_mask(request.gpu_models) & gpu_ok & mirror.host_mask(request))
        if eligible.size == 0:
            return Rejection(request.id, "capacity", "no node can host this member now (random fast path)")
        rng = random.Random(f"{seed}:{request.id}")
        node = int(eligible[rng.choice(range(eligible.size))])
        name = mirror.names[node]
        free = self.state.free_vector(node)
        if request.gpu_milli:
            gpu = min((g for g, milli in enumerate(free) if milli >= request.gpu_milli), key=lambda g: (free[g], g))
            assignment = MemberAssignment(0, name, (gpu,), request.gpu_milli)
        else:
            gpus = tuple(g for g, milli in enumerate(free) if milli >= MILLI_PER_GPU)[: request.gpus_per_member]
            assignment = MemberAssignment(0, name, gpus, MILLI_PER_GPU)
        return Placement(request.id, (assignment,), TopologyLevel.NVLINK_DOMAIN, 1.0, (REASON,))
