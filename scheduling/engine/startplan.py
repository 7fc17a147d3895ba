"""When would a workload start in a pool: the engine's EASY backfill over the pool's current snapshot.

A ``PoolSnapshot`` is one orchestrator's pool as collected: its nodes (free GPUs as they are now), its
queue in priority order, its running work with expected ends, and each team's GPUs in use and cap
there. ``estimate_start`` answers for one workload:

1. a team over its cap waits until enough of its own running work ends (known ends only);
2. ``easy_backfill`` over the queue up to and including the workload: it starts now (in queue order or
   backfilled), or, as the blocked head, at its reservation;
3. behind the head, a GPU-count drain: the queue ahead started in order on GPU counts alone as known
   ends free GPUs, each job giving its GPUs back after its estimate (never before the head's
   reservation). It ignores placement shape, so it is optimistic for fragmented pools, and it is cheap
   enough (n log n) to answer for every candidate pool at every submission.

Unknown ends (no ``expected_end``) never free GPUs, so a wait that depends on them is unknown (None).
``not_before`` is the pool's calendar floor (a maintenance window, a reserved slot): nothing starts
earlier. Work ahead means queue entries before the workload; a workload not in the queue joins it
after every entry of equal or higher priority.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from scheduling.engine.backfill import easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import BackfillDecision, Node, Request, RunningWorkload


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """One orchestrator's pool now: what the start estimate and the wait explanation read."""

    orchestrator: str
    nodes: tuple[Node, ...]
    queue: tuple[Request, ...] = ()
    running: tuple[RunningWorkload, ...] = ()
    team_in_use: Mapping[str, float] = field(default_factory=dict)
    team_cap: Mapping[str, float] = field(default_factory=dict)
    """GPU cap per team in this pool; a team absent here is uncapped."""
    not_before: float = 0.0


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """When a workload is predicted to start in one pool, and the facts behind it."""

    orchestrator: str
    start_at: float | None
    """Predicted start (seconds, the caller's epoch); None when it depends on work with no known end."""
    position: int
    """1-based place in the pool's queue."""
    ahead: int
    ahead_gpus: float
    basis: str
    """now | backfill | reservation | drain | quota | unknown."""

    def wait_s(self, now: float) -> float | None:
        return None if self.start_at is None else max(0.0, self.start_at - now)


def queue_with(request: Request, queue: Sequence[Request]) -> tuple[tuple[Request, ...], int]:
    """The queue holding ``request`` and its 0-based index (joining after equal or higher priority)."""
    for index, queued in enumerate(queue):
        if queued.id == request.id:
            return tuple(queue), index
    index = next((i for i, queued in enumerate(queue) if queued.priority < request.priority), len(queue))
    return (*queue[:index], request, *queue[index:]), index


def estimate_start(request: Request, pool: PoolSnapshot, now: float) -> StartEstimate:
    """Predicted start of ``request`` in ``pool`` (see the module docstring for the three steps)."""
    queue, index = queue_with(request, pool.queue)
    decision: list[tuple[ClusterState, BackfillDecision]] = []

    def decide() -> tuple[ClusterState, BackfillDecision]:
        if not decision:
            decision.append(_backfill(pool, queue[:index + 1], now))
        return decision[0]

    def drained(at: int) -> float | None:
        return _drain_plan(decide()[0].gpu_free, _capacity(pool), queue[:at + 1], pool.running, now)[at]

    position_of = {queued.id: i for i, queued in enumerate(queue)}
    ahead_gpus = sum(queued.gpus for queued in queue[:index])
    return _estimate(request, pool, now, index, ahead_gpus, position_of, decide, drained)


def estimate_starts(requests: Sequence[Request], pool: PoolSnapshot, now: float) -> dict[str, StartEstimate]:
    """``estimate_start`` of each of ``requests``, all queued in ``pool``, from one backfill pass: EASY decides
    each job before it looks at any later one, so its pass over the queue up to the last of them decides each
    earlier one as a pass that stopped there would (one head, one reservation). A page of a pool's jobs then
    costs one pass, not one per job. A request not in the queue is estimated on its own."""
    index_of = {queued.id: i for i, queued in enumerate(pool.queue)}
    queued = [r for r in requests if r.id in index_of]
    last = max((index_of[r.id] for r in queued), default=-1)
    shared: list[tuple[ClusterState, BackfillDecision]] = []

    def decide() -> tuple[ClusterState, BackfillDecision]:
        if not shared:
            shared.append(_backfill(pool, pool.queue[:last + 1], now))
        return shared[0]

    drains: list[list[float | None]] = []

    def drained(index: int) -> float | None:
        if not drains:
            state, _ = decide()
            drains.append(_drain_plan(state.gpu_free, _capacity(pool), pool.queue[:last + 1], pool.running, now))
        return drains[0][index]

    gpus_before = list(accumulate((queued.gpus for queued in pool.queue[:last + 1]), initial=0.0))
    estimates = {
        r.id: _estimate(r, pool, now, index_of[r.id], gpus_before[index_of[r.id]], index_of, decide, drained)
        for r in queued
    }
    return {r.id: estimates.get(r.id) or estimate_start(r, pool, now) for r in requests}


def _backfill(pool: PoolSnapshot, queue: Sequence[Request], now: float) -> tuple[ClusterState, BackfillDecision]:
    state = ClusterState(pool.nodes)
    return state, easy_backfill(state, queue, pool.running, now)


def _estimate(
    request: Request, pool: PoolSnapshot, now: float, index: int, ahead_gpus: float, position_of: Mapping[str, int],
    decide: Callable[[], tuple[ClusterState, BackfillDecision]], drained_at: Callable[[int], float | None],
) -> StartEstimate:
    """Steps 1-3 for ``request`` at ``index`` of its queue (``ahead_gpus`` asked before it, ``position_of`` each
    entry's index); ``decide`` gives the backfill pass when needed and ``drained_at`` step 3's start of the entry
    at an index (both computed once for a page of requests). Nothing here walks the queue: a plan of a whole
    queue stays linear."""
    floor = max(now, pool.not_before)

    def estimate(at: float | None, basis: str) -> StartEstimate:
        start = None if at is None else max(at, floor)
        return StartEstimate(pool.orchestrator, start, index + 1, index, ahead_gpus, basis)

    quota_free_at = _quota_free_at(request, pool, now)
    if quota_free_at is None:
        return estimate(None, "quota")
    if quota_free_at > now:
        return estimate(quota_free_at, "quota")
    _, decision = decide()
    if request.id in decision.started_ids:  # in queue order unless the blocked head is ahead of it
        backfilled = decision.head_id is not None and position_of.get(decision.head_id, index) < index
        return estimate(now, "backfill" if backfilled else "now")
    if decision.head_id == request.id:
        return estimate(decision.head_reservation_at, "reservation" if decision.head_reservation_at is not None
                        else "unknown")
    drained = drained_at(index)
    if drained is None:
        return estimate(None, "unknown")
    return estimate(max(drained, decision.head_reservation_at or now), "drain")


def _quota_free_at(request: Request, pool: PoolSnapshot, now: float) -> float | None:
    """When the team's own running work leaves room under its cap (now if it already does; None: never)."""
    cap = pool.team_cap.get(request.team)
    if cap is None:
        return now
    over = pool.team_in_use.get(request.team, 0.0) + request.gpus - cap
    if over <= 0:
        return now
    if request.gpus > cap:
        return None
    own = sorted((w.expected_end, w.gpus) for w in pool.running
                 if w.team == request.team and w.expected_end is not None)
    for end, gpus in own:
        over -= gpus
        if over <= 0:
            return max(now, end)
    return None


def _capacity(pool: PoolSnapshot) -> int:
    return sum(node.gpu_total for node in pool.nodes if node.schedulable)


def _drain_plan(
    free_now: int, capacity: int, queue: Sequence[Request], running: Sequence[RunningWorkload], now: float,
) -> list[float | None]:
    """Step 3 for every entry of ``queue`` in one pass: each takes its GPUs, in order, when enough have been
    freed by known ends, and gives them back after its estimate. An entry's start depends only on the entries
    before it, so entry i's answer is that of a pass over ``queue[:i + 1]``. None: the known ends never free
    enough (for it and everything after it). Jobs larger than the pool never start and are passed over
    (their answer is when the entries before them have started)."""
    ends = [(w.expected_end, w.gpus) for w in running if w.expected_end is not None]
    heapq.heapify(ends)
    free, at = float(free_now), now
    plan: list[float | None] = []
    for job in queue:
        if job.gpus <= capacity:
            while free < job.gpus and ends:
                end, gpus = heapq.heappop(ends)
                free, at = free + gpus, max(at, end)
            if free < job.gpus:
                return plan + [None] * (len(queue) - len(plan))
            free -= job.gpus
            if job.duration_estimate_s > 0:
                heapq.heappush(ends, (at + job.duration_estimate_s, job.gpus))
        plan.append(at)
    return plan


def describe_wait(wait_s: float | None) -> str:
    """A wait as a researcher reads it: "now", "~40 min", "~2 h", "~3 d", "unknown"."""
    if wait_s is None or math.isinf(wait_s):
        return "unknown"
    if wait_s < 60:
        return "now"
    if wait_s < 3600:
        return f"~{round(wait_s / 60)} min"
    if wait_s < 2 * 86400:
        return f"~{wait_s / 3600:.0f} h" if wait_s >= 3 * 3600 else f"~{wait_s / 3600:.1f} h"
    return f"~{wait_s / 86400:.0f} d"
