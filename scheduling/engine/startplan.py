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

import bisect
import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from scheduling.engine.backfill import EasyPass, easy_backfill
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


def estimate_start(request: Request, pool: PoolSnapshot, now: float) -> StartEstimate:
    """Predicted start of ``request`` in ``pool`` (see the module docstring for the three steps)."""
    return StartPlanner(pool, now).estimate(request)


class StartPlanner:
    """``estimate_start`` for any number of workloads against one pool snapshot at one moment.

    A workload joins the queue after every entry of equal or higher priority, so the workloads of a stream
    (admissions, submissions, a batch being routed) join at a few places only, one per priority level. The
    planner keeps, per place, the EASY pass over the queue ahead of it, stopped there (``EasyPass``: EASY
    decides each job before it looks at a later one), and step 3's drain at that place as sorted ends; a
    workload then costs a ``peek`` at the stopped pass and a bisect, not a pass over the queue. One thread at
    a time: a peek commits and releases on the pass's shadow state.
    """

    __slots__ = ("_drains", "_gpus_before", "_index_of", "_lowest_ahead", "_own_ends", "_passes", "_state",
                 "now", "pool")

    def __init__(self, pool: PoolSnapshot, now: float) -> None:
        self.pool, self.now = pool, now
        self._index_of = {queued.id: i for i, queued in enumerate(pool.queue)}
        # minus the lowest priority among the first i + 1 entries: non-decreasing, so a bisect finds where a
        # priority joins (before the first entry of lower priority)
        self._lowest_ahead = list(accumulate((-queued.priority for queued in pool.queue), max))
        self._gpus_before = list(accumulate((queued.gpus for queued in pool.queue), initial=0.0))
        self._state = ClusterState(pool.nodes)  # shared by every pass, never changed (each copies to commit)
        self._passes: dict[int, EasyPass] = {}
        self._drains: dict[int, _DrainPoint] = {}
        self._own_ends: dict[str, list[tuple[float, float]]] = {}

    def estimate(self, request: Request) -> StartEstimate:
        index = self._index_of.get(request.id)
        if index is None:
            index = bisect.bisect_right(self._lowest_ahead, -request.priority)
        return _estimate(request, self.pool, self.now, index, self._gpus_before[index],
                         lambda joining, at: self._pass(at).peek(joining),
                         lambda at: self._drain(at).start(request), self._own_ends)

    def _pass(self, index: int) -> EasyPass:
        easy = self._passes.get(index)
        if easy is None:
            easy = EasyPass(self._state, self.pool.running, self.now)
            easy.feed(self.pool.queue[:index])
            self._passes[index] = easy
        return easy

    def _drain(self, index: int) -> _DrainPoint:
        point = self._drains.get(index)
        if point is None:
            drain = _Drain(self._state.gpu_free, _capacity(self.pool), self.pool.running, self.now)
            for queued in self.pool.queue[:index]:
                drain.take(queued)
            point = self._drains[index] = drain.point()
        return point


class StartPlans:
    """A ``StartPlanner`` per pool snapshot, for one moment: a caller deciding for many workloads against
    the same snapshots (``routing.route_by_start`` over a stream) passes one, so each pool's passes are
    computed once."""

    __slots__ = ("_planners", "now")

    def __init__(self, now: float) -> None:
        self.now = now
        self._planners: dict[int, StartPlanner] = {}

    def estimate(self, request: Request, pool: PoolSnapshot) -> StartEstimate:
        planner = self._planners.get(id(pool))
        if planner is None or planner.pool is not pool:  # the planner holds its pool, so an id is never reused
            planner = self._planners[id(pool)] = StartPlanner(pool, self.now)
        return planner.estimate(request)


def estimate_starts(requests: Sequence[Request], pool: PoolSnapshot, now: float) -> dict[str, StartEstimate]:
    """``estimate_start`` of each of ``requests``, all queued in ``pool``, from one backfill pass: EASY decides
    each job before it looks at any later one, so its pass over the queue up to the last of them decides each
    earlier one as a pass that stopped there would (one head, one reservation). A page of a pool's jobs then
    costs one pass, not one per job. A request not in the queue is estimated on its own."""
    index_of = {queued.id: i for i, queued in enumerate(pool.queue)}
    queued = [r for r in requests if r.id in index_of]
    last = max((index_of[r.id] for r in queued), default=-1)
    shared: list[tuple[BackfillDecision, set[str]]] = []

    def outcome(request: Request, index: int) -> tuple[str, float | None]:
        if not shared:
            decision = easy_backfill(ClusterState(pool.nodes), pool.queue[:last + 1], pool.running, now)
            shared.append((decision, set(decision.started_ids)))
        decision, started = shared[0]
        if request.id in started:  # in queue order unless the blocked head is ahead of it
            head_ahead = decision.head_id is not None and index_of.get(decision.head_id, index) < index
            return ("backfill" if head_ahead else "now"), decision.head_reservation_at
        return ("head" if decision.head_id == request.id else "behind"), decision.head_reservation_at

    drains: list[list[float | None]] = []

    def drained(index: int) -> float | None:
        if not drains:
            drain = _Drain(ClusterState(pool.nodes).gpu_free, _capacity(pool), pool.running, now)
            drains.append([drain.take(queued) for queued in pool.queue[:last + 1]])
        return drains[0][index]

    gpus_before = list(accumulate((queued.gpus for queued in pool.queue[:last + 1]), initial=0.0))
    estimates = {
        r.id: _estimate(r, pool, now, index_of[r.id], gpus_before[index_of[r.id]], outcome, drained)
        for r in queued
    }
    return {r.id: estimates.get(r.id) or estimate_start(r, pool, now) for r in requests}


def _estimate(
    request: Request, pool: PoolSnapshot, now: float, index: int, ahead_gpus: float,
    outcome: Callable[[Request, int], tuple[str, float | None]], drained_at: Callable[[int], float | None],
    own_ends: dict[str, list[tuple[float, float]]] | None = None,
) -> StartEstimate:
    """Steps 1-3 for ``request`` at ``index`` of its queue (``ahead_gpus`` asked before it); ``outcome`` gives
    what the backfill pass did with it (``EasyPass.peek``'s answer) and ``drained_at`` step 3's start of the
    entry at an index (both computed once for a page of requests). Nothing here walks the queue: a plan of
    a whole queue stays linear."""
    floor = max(now, pool.not_before)

    def estimate(at: float | None, basis: str) -> StartEstimate:
        start = None if at is None else max(at, floor)
        return StartEstimate(pool.orchestrator, start, index + 1, index, ahead_gpus, basis)

    quota_free_at = _quota_free_at(request, pool, now, {} if own_ends is None else own_ends)
    if quota_free_at is None:
        return estimate(None, "quota")
    if quota_free_at > now:
        return estimate(quota_free_at, "quota")
    happened, reservation_at = outcome(request, index)
    if happened in ("now", "backfill"):
        return estimate(now, happened)
    if happened == "head":
        return estimate(reservation_at, "reservation" if reservation_at is not None else "unknown")
    drained = drained_at(index)
    if drained is None:
        return estimate(None, "unknown")
    return estimate(max(drained, reservation_at or now), "drain")


def _quota_free_at(
    request: Request, pool: PoolSnapshot, now: float, own_ends: dict[str, list[tuple[float, float]]],
) -> float | None:
    """When the team's own running work leaves room under its cap (now if it already does; None: never).
    ``own_ends`` keeps each team's known ends, sorted, for the next workload of the same team."""
    cap = pool.team_cap.get(request.team)
    if cap is None:
        return now
    over = pool.team_in_use.get(request.team, 0.0) + request.gpus - cap
    if over <= 0:
        return now
    if request.gpus > cap:
        return None
    own = own_ends.get(request.team)
    if own is None:
        own = own_ends[request.team] = sorted((w.expected_end, w.gpus) for w in pool.running
                                              if w.team == request.team and w.expected_end is not None)
    for end, gpus in own:
        over -= gpus
        if over <= 0:
            return max(now, end)
    return None


def _capacity(pool: PoolSnapshot) -> int:
    return sum(node.gpu_total for node in pool.nodes if node.schedulable)


class _Drain:
    """Step 3 over a queue, one entry at a time: each takes its GPUs, in order, when enough have been freed by
    known ends, and gives them back after its estimate. An entry's start depends only on the entries before
    it, so ``take`` answers each entry as a drain of just its prefix would. None: the known ends never free
    enough (for it and everything after it). Jobs larger than the pool never start and are passed over
    (their answer is when the entries before them have started)."""

    __slots__ = ("at", "capacity", "ends", "free", "stuck")

    def __init__(self, free_now: int, capacity: int, running: Sequence[RunningWorkload], now: float) -> None:
        self.ends = [(w.expected_end, w.gpus) for w in running if w.expected_end is not None]
        heapq.heapify(self.ends)
        self.free, self.at, self.capacity, self.stuck = float(free_now), now, capacity, False

    def take(self, job: Request) -> float | None:
        if self.stuck:
            return None
        if job.gpus <= self.capacity:
            ends = self.ends
            while self.free < job.gpus and ends:
                end, gpus = heapq.heappop(ends)
                self.free, self.at = self.free + gpus, max(self.at, end)
            if self.free < job.gpus:
                self.stuck = True
                return None
            self.free -= job.gpus
            if job.duration_estimate_s > 0:
                heapq.heappush(ends, (self.at + job.duration_estimate_s, job.gpus))
        return self.at

    def point(self) -> _DrainPoint:
        return _DrainPoint(self)


class _DrainPoint:
    """A ``_Drain`` stopped at one place, answering for any one more entry without changing: its known ends
    sorted (the order the heap would pop them) beside the GPUs free after each, summed in that same order, so
    the entry's start is a bisect."""

    __slots__ = ("at", "capacity", "ends", "free_after", "stuck")

    def __init__(self, drain: _Drain) -> None:
        self.at, self.capacity, self.stuck = drain.at, drain.capacity, drain.stuck
        ordered = sorted(drain.ends)
        self.ends = [end for end, _gpus in ordered]
        self.free_after = list(accumulate((gpus for _end, gpus in ordered), initial=drain.free))

    def start(self, job: Request) -> float | None:
        if self.stuck:
            return None
        if job.gpus > self.capacity:
            return self.at
        popped = bisect.bisect_left(self.free_after, job.gpus)
        if popped == len(self.free_after):
            return None
        return max(self.at, self.ends[popped - 1]) if popped else self.at


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
