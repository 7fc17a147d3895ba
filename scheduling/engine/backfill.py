"""EASY backfill (Slurm ``sched/backfill``, Lifka's EASY): the queue head gets a reservation, and later
jobs may jump ahead only if that cannot delay it.

1. Jobs start in queue order while they fit.
2. The first job that does not fit is the *head*. Running work is released in order of expected end
   (on a shadow copy) until the head fits: that moment is its reservation, on those nodes.
3. Each later job that fits now starts if it will end by the reservation (its estimate says so), or
   if the GPUs it would take are still free at the reservation with the head in place.

Unknown ends (no ``expected_end``, or ``duration_estimate_s`` of 0) count as never: such a job can
only backfill into room the head does not need. When no reservation can be computed (the head needs
capacity that never frees), nothing is protected and later jobs start if they fit; the decision says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import running_placement
from scheduling.engine.types import BackfillDecision, Node, Placement, Request, RunningWorkload


def easy_backfill(
    state: ClusterState | Sequence[Node],
    queue: Sequence[Request],
    running: Sequence[RunningWorkload],
    now: float,
    *,
    policy: str = "best-fit",
    seed: int = 0,
) -> BackfillDecision:
    """Which queued jobs start now, and when the blocked head is promised to start.

    ``state`` must already hold ``running`` (their GPUs are not free); it is not modified.
    ``queue`` is in priority order (for example ``fairshare.order_pending``).
    """
    work = state.copy() if isinstance(state, ClusterState) else ClusterState(state)
    started: list[Placement] = []
    reasons: list[str] = []
    position = 0
    for request in queue:
        placement = work.place(request, policy, seed=seed)
        if not isinstance(placement, Placement):
            break
        work.commit(placement, request)
        started.append(placement)
        reasons.append(f"{request.id}: starts in queue order")
        position += 1
    if position == len(queue):
        return BackfillDecision(tuple(started), reasons=tuple(reasons))
    head = queue[position]
    ending = _ending_work(running, queue[:position], started, now)
    reservation = _reserve(work, head, ending, policy, seed)
    if reservation is None:
        reasons.append(f"{head.id}: head is blocked and no reservation is possible (the capacity it needs never "
                       "frees by known end times); later jobs start if they fit")
    else:
        at, placement, _shadow = reservation
        reasons.append(f"{head.id}: head reserved at t={at:g} on {', '.join(placement.nodes)}")
    for request in queue[position + 1:]:
        placement = work.place(request, policy, seed=seed)
        if not isinstance(placement, Placement):
            continue
        verdict = _may_backfill(request, placement, reservation, now)
        if verdict:
            work.commit(placement, request)
            started.append(placement)
            reasons.append(f"{request.id}: backfilled, {verdict}")
        else:
            reasons.append(f"{request.id}: fits now but would delay the head {head.id}")
    return BackfillDecision(
        tuple(started), head.id,
        reservation[0] if reservation else None,
        reservation[1].nodes if reservation else (),
        tuple(reasons),
    )


_Ending = tuple[float, str, Placement, Request]


def _ending_work(
    running: Sequence[RunningWorkload], started_requests: Sequence[Request], started: Sequence[Placement],
    now: float,
) -> list[_Ending]:
    """Everything that will free GPUs at a known time, soonest first (overdue work counts as now)."""
    ending: list[_Ending] = []
    for workload in running:
        if workload.expected_end is not None and workload.assignments:
            placement, request = running_placement(workload)
            ending.append((max(now, workload.expected_end), workload.id, placement, request))
    for request, placement in zip(started_requests, started, strict=True):
        if request.duration_estimate_s > 0:
            ending.append((now + request.duration_estimate_s, request.id, placement, request))
    ending.sort(key=lambda item: (item[0], item[1]))
    return ending


def _reserve(
    work: ClusterState, head: Request, ending: Sequence[_Ending], policy: str, seed: int
) -> tuple[float, Placement, ClusterState] | None:
    """Earliest time the head fits as work ends; the shadow state holds the head's reservation."""
    shadow = work.copy()
    for at, _id, placement, request in ending:
        shadow.release(placement, request)
        attempt = shadow.place(head, policy, seed=seed)
        if isinstance(attempt, Placement):
            shadow.commit(attempt, head)
            return at, attempt, shadow
    return None


def _may_backfill(
    request: Request, placement: Placement,
    reservation: tuple[float, Placement, ClusterState] | None, now: float,
) -> str:
    """Why ``request`` may start now without delaying the head, or "" if it may not."""
    if reservation is None:
        return "no reservation to protect"
    at, _head, shadow = reservation
    ends = now + request.duration_estimate_s if request.duration_estimate_s > 0 else math.inf
    if ends <= at:
        return f"ends by t={ends:g}, before the head's reservation at t={at:g}"
    try:
        shadow.commit(placement, request)  # still running at the reservation: must coexist with the head
    except ValueError:
        return ""
    return "uses GPUs the head does not need at its reservation"
