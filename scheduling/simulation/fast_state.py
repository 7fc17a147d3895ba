"""Prototype of an engine fast path: reject by GPU count before any placement work.

``ClusterState.place`` answers "no" quickly only for one-member whole-GPU requests, and only after
looking at its buckets; a gang, or any request inside ``backfill.easy_backfill``'s candidate loop, pays
for a placement attempt even when the fleet has fewer wholly free GPUs than the request needs. In a
replay that loop runs over up to ``max_tests`` queued jobs after every completion, and once the first
backfilled job has taken the free GPUs every later candidate is such a hopeless attempt: on the full
Philly trace (siloed) this was half of the run time.

``CountingState`` answers those requests with a ``Rejection`` from the free-GPU counter (O(1)) and
leaves everything else to the engine. It changes no decision: a request that needs more whole GPUs
than are free anywhere cannot be placed, and callers (backfill, preemption, the simulator's queues)
only distinguish a ``Placement`` from a ``Rejection`` (a malformed request may be refused as "capacity"
here rather than "invalid"; the simulator refuses malformed requests at arrival). Copies (backfill's
working and shadow states, preemption trials) keep the fast path.

The engine change this stands for (to replace this module): at the top of ``ClusterState.place``,
after validation, ``if not request.gpu_milli and request.gpus > self.gpu_free: return`` a capacity
``Rejection``. ``easy_backfill`` now does the equivalent itself (``ClusterState.could_fit``); this class
still saves the work in the greedy and FCFS queues and in preemption trials.
"""

from __future__ import annotations

from scheduling.engine.placement import POLICIES, ClusterState
from scheduling.engine.types import Placement, Rejection, Request

TOO_FEW_FREE = "needs more whole GPUs than the fleet has free"


class CountingState(ClusterState):
    def place(self, request: Request, policy: str = "best-fit", *, seed: int = 0) -> Placement | Rejection:
        free = self.gpu_free
        if not request.gpu_milli and request.gpus > free and policy in POLICIES:
            return Rejection(request.id, "capacity", TOO_FEW_FREE, free, free)
        return super().place(request, policy, seed=seed)

    def copy(self) -> CountingState:
        clone = super().copy()
        clone.__class__ = CountingState
        return clone  # type: ignore[return-value]
