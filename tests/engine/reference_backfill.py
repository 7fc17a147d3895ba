"""EASY backfill written the plain way, kept as the reference the optimised engine and simulator are
compared with (no memo of attempts, no release counter, no ending queue, no pool-side filters).

1. Start queued jobs in order while they fit (on a copy of the state).
2. The first that does not is the head: release known-ending work one entry at a time, soonest first
   (overdue work as ending now, ties by id), trying the head after each release; the first time it fits
   is its reservation, and the shadow state keeps it in place.
3. Every later job that fits now starts if it ends by the reservation, or if its placement still fits on
   the shadow state next to the head (which then keeps it too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import running_placement
from scheduling.engine.types import Placement, Request, RunningWorkload


def reference_easy_backfill(
    state: ClusterState, queue: Sequence[Request], running: Sequence[RunningWorkload], now: float,
    *, policy: str = "best-fit", seed: int = 0,
) -> list[Placement]:
    """The placements that start now, in the order the engine returns them."""
    work = state.copy()
    started: list[Placement] = []
    while len(started) < len(queue):
        placement = _place(work, queue[len(started)], policy, seed)
        if placement is None:
            break
        work.commit(placement, queue[len(started)])
        started.append(placement)
    position = len(started)
    if position == len(queue):
        return started
    head = queue[position]
    ending = [(now + request.duration_estimate_s, request.id, placement, request)
              for request, placement in zip(queue[:position], started, strict=True)
              if request.duration_estimate_s > 0]
    for workload in running:
        if workload.expected_end is not None and workload.assignments:
            placement, request = running_placement(workload)
            ending.append((max(now, workload.expected_end), workload.id, placement, request))
    ending.sort(key=lambda item: (item[0], item[1]))
    shadow = work.copy()
    reservation: float | None = None
    for at, _id, placement, request in ending:
        shadow.release(placement, request)
        attempt = _place(shadow, head, policy, seed)
        if attempt is not None:
            shadow.commit(attempt, head)
            reservation = at
            break
    for request in queue[position + 1:]:
        placement = _place(work, request, policy, seed)
        if placement is None:
            continue
        ends = now + request.duration_estimate_s if request.duration_estimate_s > 0 else math.inf
        if reservation is not None and ends > reservation:
            try:
                shadow.commit(placement, request)
            except ValueError:
                continue
        work.commit(placement, request)
        started.append(placement)
    return started


def _place(state: ClusterState, request: Request, policy: str, seed: int) -> Placement | None:
    outcome = state.place(request, policy, seed=seed)
    return outcome if isinstance(outcome, Placement) else None
