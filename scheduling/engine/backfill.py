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

Reservation rules (``reservation=``): ``earliest`` (above: released one by one, the earliest moment the
head fits) or ``slurm-22.05``, the batches of Slurm 22.05's will-run test (``_will_run_test`` in
``src/plugins/select/cons_common/job_test.c``, 22.05.8; re-expressed from reading it, no code taken):

* running work is walked in order of expected end over the *whole cluster*; work on nodes the head cannot
  use (other partitions: ``elsewhere``, end times only) is skipped, but still read as "the next job";
* the first batch ends at the first usable job's end rounded up to a multiple of ``SLURM_WILL_RUN_WINDOW_S``
  (30 s), plus one window; after each batch the window doubles (at least once, until it reaches the next
  job); a batch closes after a usable job whose *next* job (usable or not) ends past the batch's end;
* after each batch the head is tried; if it fits, its reservation is the end of the batch's last usable
  job, not the moment it first fitted.

So when work elsewhere ends just after the batch's last usable job, the walk skips it without closing the
batch and takes the next usable job whatever its end: the reservation lands at that job's end, possibly
minutes after the head first fits (in slurmctld's log of a loaded partitioned run, 2,823 of 2,831
reservations are at the second this rule gives, 943 at the earliest fit: docs/simulator.md). A later
reservation lets more small jobs backfill ahead of the head. Not modelled: the test skipped after more
than 200 jobs in one batch and the two-second wall-clock cap on the walk.

Incremental use: a caller that runs backfill after every change (a simulator, a scheduling loop) keeps
an ``EndingQueue`` next to its running set and passes it instead of the list of running workloads. The
queue holds each running workload's (placement, request) pair sorted by expected end, so a call no
longer converts and sorts the whole running set; the decision is the same (tests compare both paths).
Requests that cannot fit by GPU count alone (``ClusterState.could_fit``) are answered without a
placement attempt, in the queue, the reservation search and the backfill loop alike.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter

from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import running_placement
from scheduling.engine.types import BackfillDecision, Node, Placement, Request, RunningWorkload

_Ending = tuple[float, str, Placement, Request]
_END_ORDER = itemgetter(0, 1)  # soonest end first, ties by id (a C-level key: thousands per estimate)

RESERVATIONS = ("earliest", "slurm-22.05")
SLURM_WILL_RUN_WINDOW_S = 30.0  # time_window of Slurm 22.05's _will_run_test


class EndingQueue:
    """Running work with a known end, sorted by (expected end, id), each with its release pair.

    Add a workload when it starts and remove it when it stops; work without ``expected_end`` or without
    assignments never frees GPUs at a known time and is not kept.
    """

    __slots__ = ("_keys", "_pairs", "version")

    def __init__(self, running: Iterable[RunningWorkload] = ()) -> None:
        self._keys: list[tuple[float, str]] = []
        self._pairs: dict[str, tuple[float, Placement, Request]] = {}
        self.version = 0  # bumped by every change, so a BackfillMemory can tell it is unchanged
        for workload in running:
            self.add(workload)

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, workload: RunningWorkload) -> None:
        if workload.id in self._pairs:
            raise ValueError(f"{workload.id} is already in the ending queue")
        if workload.expected_end is None or not workload.assignments:
            return
        placement, request = running_placement(workload)
        key = (workload.expected_end, workload.id)
        position = bisect.bisect_left(self._keys, key)
        self._keys.insert(position, key)
        self._pairs[workload.id] = (workload.expected_end, placement, request)
        self.version += 1

    def remove(self, workload_id: str) -> None:
        """Forget a workload (a no-op for work that was never kept: unknown end or no assignments)."""
        entry = self._pairs.pop(workload_id, None)
        if entry is None:
            return
        position = bisect.bisect_left(self._keys, (entry[0], workload_id))
        del self._keys[position]
        self.version += 1

    def overdue(self, now: float) -> bool:
        """Whether some work should have ended before ``now`` (``ordered`` then moves it to ``now``)."""
        return bool(self._keys) and self._keys[0][0] < now

    def ends(self, now: float) -> list[float]:
        """Expected ends, soonest first, overdue work counted as ending ``now`` (as ``ordered``)."""
        return [max(now, end) for end, _id in self._keys]

    def ordered(self, now: float) -> Iterator[_Ending]:
        """Entries soonest first, overdue work counted as ending ``now`` (so overdue entries sort by id)."""
        overdue = bisect.bisect_right(self._keys, now, key=itemgetter(0))
        for _end, workload_id in sorted(self._keys[:overdue], key=lambda key: key[1]):
            _at, placement, request = self._pairs[workload_id]
            yield now, workload_id, placement, request
        for end, workload_id in self._keys[overdue:]:
            _at, placement, request = self._pairs[workload_id]
            yield end, workload_id, placement, request


def easy_backfill(
    state: ClusterState | Sequence[Node],
    queue: Sequence[Request],
    running: Sequence[RunningWorkload] | EndingQueue,
    now: float,
    *,
    policy: str = "best-fit",
    seed: int = 0,
    memory: BackfillMemory | None = None,
    reservation: str = "earliest",
    elsewhere: Sequence[float] = (),
) -> BackfillDecision:
    """Which queued jobs start now, and when the blocked head is promised to start.

    ``state`` must already hold ``running`` (their GPUs are not free); it is not modified.
    ``queue`` is in priority order (for example ``fairshare.order_pending``). ``running`` is either the
    running workloads or an ``EndingQueue`` the caller keeps in step with them (same decision, less work).
    A caller that runs a pass after every event passes the same ``memory`` each time (with an
    ``EndingQueue``): a pass whose inputs did not change since the last one reuses its reservation.
    ``reservation`` is the rule for the head's reservation (``RESERVATIONS``, see the module doc);
    ``elsewhere`` (``slurm-22.05`` only) the expected ends, soonest first, of running work on nodes
    outside ``state`` (the rest of the cluster), which Slurm's will-run walk reads but skips.
    """
    easy = EasyPass(state, running, now, policy=policy, seed=seed, memory=memory, reservation=reservation,
                    elsewhere=elsewhere)
    easy.feed(queue)
    return easy.decision()


class EasyPass:
    """One EASY pass that can stop between jobs: ``feed`` jobs in queue order (in one call or several),
    read the ``decision`` so far, or ``peek`` at what the pass would do with one more job without changing it.

    EASY decides each job before it looks at any later one, so a pass stopped before job *i* is the pass
    over the queue up to *i*, and ``peek`` answers for a workload joining the queue there: a start estimate
    for many new workloads (a stream of admissions) keeps one stopped pass per place in the queue instead of
    running a pass per workload.
    """

    __slots__ = ("_attempts", "_elsewhere", "_head", "_in_order", "_memory", "_now", "_owed", "_owned", "_policy",
                 "_reasons", "_reservation", "_rule", "_running", "_seed", "_started", "_work")

    def __init__(
        self, state: ClusterState | Sequence[Node], running: Sequence[RunningWorkload] | EndingQueue, now: float,
        *, policy: str = "best-fit", seed: int = 0, memory: BackfillMemory | None = None,
        reservation: str = "earliest", elsewhere: Sequence[float] = (),
    ) -> None:
        if reservation not in RESERVATIONS:
            raise ValueError(f"unknown reservation rule {reservation!r}; expected one of {RESERVATIONS}")
        self._rule, self._elsewhere = reservation, elsewhere
        if reservation != "earliest":
            memory = None  # the reservation also depends on work elsewhere, which the memory's key does not see
        self._work = state if isinstance(state, ClusterState) else ClusterState(state)
        self._owned = self._work is not state  # copied before the first commit: the caller's state stays as given
        self._running, self._now, self._policy, self._seed, self._memory = running, now, policy, seed, memory
        self._started: list[Placement] = []
        self._in_order: list[Request] = []
        self._reasons: list[str] = []
        self._head: Request | None = None
        self._reservation: _Reservation | None = None
        self._attempts: _Attempts | None = None
        # The blocked head's reservation is computed when first needed: the memory key it will be kept under
        # and the place of its reason, or None once settled (or while there is no head).
        self._owed: tuple[tuple[object, ...] | None, int] | None = None

    def feed(self, jobs: Sequence[Request]) -> None:
        """The next jobs of the queue, in order: they start in order while they fit; the first that does not
        is the head and gets its reservation; every later one backfills if that cannot delay the head."""
        position = 0
        if self._head is None:
            for request in jobs:
                placement = _try(self._work, request, self._policy, self._seed)
                if placement is None:
                    break
                self._commit(placement, request)
                self._in_order.append(request)
                self._reasons.append(f"{request.id}: starts in queue order")
                position += 1
            if position == len(jobs):
                return
            self._block(jobs[position])
            position += 1
        self._backfill(jobs[position:])

    def peek(self, request: Request) -> tuple[str, float | None]:
        """What feeding ``request`` next would do, the pass left unchanged: ``now`` (starts in queue order),
        ``backfill``, ``head`` (it becomes the blocked head) or ``behind`` (it waits behind the head), with
        the head's reservation time (None: no reservation, or none possible)."""
        if self._head is None:
            if _try(self._work, request, self._policy, self._seed) is not None:
                return "now", None
            reservation = self._reserve(request)
            return "head", reservation[0] if reservation else None
        assert self._attempts is not None
        self._settle()
        at = self._reservation[0] if self._reservation else None
        placement = self._attempts.place(request)
        if placement is not None and self._attempts.verdict(request, placement, self._reservation, self._now,
                                                            keep=False)[0]:
            return "backfill", at
        return "behind", at

    def started(self) -> tuple[Placement, ...]:
        """The placements that start so far (what ``decision().start_now`` says), without computing the head's
        reservation when no later job needed it: a caller that acts on the starts alone saves that search."""
        return tuple(self._started)

    def decision(self) -> BackfillDecision:
        self._settle()
        reservation = self._reservation
        return BackfillDecision(
            tuple(self._started), self._head.id if self._head else None,
            reservation[0] if reservation else None,
            reservation[1].nodes if reservation else (),
            tuple(self._reasons),
        )

    def _commit(self, placement: Placement, request: Request) -> None:
        if not self._owned:
            self._work, self._owned = self._work.copy(), True
        self._work.commit(placement, request)
        self._started.append(placement)

    def _block(self, head: Request) -> None:
        """``head`` does not fit now: it gets the earliest moment it fits as known work ends (see ``_settle``)."""
        self._head = head
        memory = self._memory
        key = _memory_key(self._work, self._owned, head, self._running, self._now, self._policy, self._seed)
        self._reasons.append("")  # the head's reason, written once its reservation is known
        if memory is not None and key is not None and memory.key == key:
            self._reservation, self._attempts = memory.recall(head)
            self._explain_reservation(len(self._reasons) - 1)
        else:
            self._attempts = _Attempts(self._work, self._policy, self._seed)
            self._owed = (key, len(self._reasons) - 1)

    def _settle(self) -> None:
        """Compute the head's reservation if it is still owed.

        Lazily, because most passes never need it (in the federated Philly replay 21,000 of 34,000 passes
        with a blocked head had no later job that fits now). It is the reservation ``_block`` would have
        made: the work state, the jobs started in order and the ending work stay as they were at ``_block``
        until the first backfill, and a backfill verdict settles it first.
        """
        if self._owed is None:
            return
        key, reason = self._owed
        self._owed = None
        assert self._head is not None and self._attempts is not None
        self._reservation = self._reserve(self._head)
        if self._memory is not None:
            self._memory.keep(key, self._reservation, self._attempts)
        self._explain_reservation(reason)

    def _explain_reservation(self, position: int) -> None:
        head, reservation = self._head, self._reservation
        assert head is not None
        if reservation is None:
            self._reasons[position] = (f"{head.id}: head is blocked and no reservation is possible (the capacity "
                                       "it needs never frees by known end times); later jobs start if they fit")
        else:
            at, placement, _shadow = reservation
            self._reasons[position] = f"{head.id}: head reserved at t={at:g} on {', '.join(placement.nodes)}"

    def _reserve(self, head: Request) -> _Reservation | None:
        ending = _ending_work(self._running, self._in_order, self._started, self._now)
        if self._rule == "slurm-22.05":
            return _reserve_batched(self._work, head, ending, self._elsewhere, self._policy, self._seed)
        return _reserve(self._work, head, ending, self._policy, self._seed)

    def _backfill(self, jobs: Sequence[Request]) -> None:
        attempts, reasons, now = self._attempts, self._reasons, self._now
        assert attempts is not None and self._head is not None
        head_id = self._head.id
        for request in jobs:
            placement = attempts.place(request)
            if placement is None:
                continue
            self._settle()  # the first job that fits now needs the head's reservation
            reservation = self._reservation
            verdict, placement = attempts.verdict(request, placement, reservation, now)
            if verdict:
                self._commit(placement, request)
                attempts.forget(self._work)
                if self._memory is not None:
                    self._memory.key = None  # the shadow may hold this job now
                reasons.append(f"{request.id}: backfilled, {verdict}")
            else:
                reasons.append(f"{request.id}: fits now but would delay the head {head_id}")


_Reservation = tuple[float, Placement, ClusterState]


class BackfillMemory:
    """The reservation and remembered attempts of a caller's last pass, for its next pass.

    Reused only when the next pass would compute exactly the same: the caller's state and ending queue
    unchanged since (their versions), no job started in queue order, a head of the same shape, the same
    policy and seed, and no overdue running work at either pass (overdue work counts as ending *now*,
    which moves with the clock). Any start in the pass that used it drops it.
    """

    __slots__ = ("_attempts", "_reservation", "key")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self._reservation: _Reservation | None = None
        self._attempts: _Attempts | None = None

    def keep(self, key: tuple[object, ...] | None, reservation: _Reservation | None, attempts: _Attempts) -> None:
        self.key, self._reservation, self._attempts = key, reservation, attempts

    def recall(self, head: Request) -> tuple[_Reservation | None, _Attempts]:
        assert self._attempts is not None
        reservation = self._reservation
        if reservation is not None and reservation[1].request_id != head.id:
            at, placement, shadow = reservation
            placement = Placement(head.id, placement.assignments, placement.topology, placement.score,
                                  placement.reasons)
            reservation = self._reservation = (at, placement, shadow)
        return reservation, self._attempts


def _memory_key(
    work: ClusterState, owned: bool, head: Request, running: Sequence[RunningWorkload] | EndingQueue,
    now: float, policy: str, seed: int,
) -> tuple[object, ...] | None:
    """What a pass's reservation depends on, or None when it cannot be reused (see ``BackfillMemory``)."""
    if owned or not isinstance(running, EndingQueue) or policy not in MEMO_POLICIES or running.overdue(now):
        return None
    return (work, work.version, running, running.version, _shape(head), policy, seed)  # objects compare by identity


_Shape = tuple[object, ...]


class _Attempts:
    """Placement attempts of the backfill loop, remembered per request shape until ``work`` changes.

    The loop tests up to ``bf_max_job_test`` queued jobs, most of them of a few shapes (one GPU, eight
    GPUs...), against a working state that changes only when a job starts. The placement policies in
    ``MEMO_POLICIES`` decide from the shape and the state alone (not the request's id, which only seeds
    the random policy), so a shape already tried on this state gets the same answer: the same placement
    under the new id, or the same refusal; and a placement the shadow state refused is refused again
    while neither state changed (a refused commit leaves the shadow as it was). Call ``forget`` after
    committing to ``work`` (the shadow changes only in the same step).
    """

    __slots__ = ("_memo", "_policy", "_refused", "_seed", "_shape", "_work")

    def __init__(self, work: ClusterState, policy: str, seed: int) -> None:
        self._work = work
        self._policy = policy
        self._seed = seed
        self._memo: dict[_Shape, Placement | None] | None = {} if policy in MEMO_POLICIES else None
        self._refused: set[_Shape] = set()
        self._shape: _Shape = ()  # of the request ``place`` saw last

    def forget(self, work: ClusterState) -> None:
        """``work`` changed (or is a fresh copy about to change): nothing remembered holds any more."""
        self._work = work
        if self._memo is not None:
            self._memo.clear()
        self._refused.clear()

    def place(self, request: Request) -> Placement | None:
        """The placement ``request``'s shape gets on ``work`` now (possibly remembered under another job's id:
        ``verdict`` hands it out under this one's), or None."""
        if self._memo is None:
            return _try(self._work, request, self._policy, self._seed)
        shape = self._shape = _shape(request)
        if shape in self._memo:
            return self._memo[shape]
        placement = self._memo[shape] = _try(self._work, request, self._policy, self._seed)
        return placement

    def verdict(
        self, request: Request, placement: Placement,
        reservation: tuple[float, Placement, ClusterState] | None, now: float, *, keep: bool = True,
    ) -> tuple[str, Placement]:
        """``_may_backfill``'s verdict on the placement ``place`` just gave, and that placement for ``request``."""
        if self._memo is None:
            return _may_backfill(request, placement, reservation, now, keep=keep), placement
        shape = self._shape
        if shape in self._refused and reservation is not None:
            ends = now + request.duration_estimate_s if request.duration_estimate_s > 0 else math.inf
            if ends > reservation[0]:
                return "", placement  # the shadow refused this very placement and has not changed since
        if placement.request_id != request.id:
            placement = Placement(request.id, placement.assignments, placement.topology, placement.score,
                                  placement.reasons)
        verdict = _may_backfill(request, placement, reservation, now, keep=keep)
        if not verdict:
            self._refused.add(shape)
        return verdict, placement


MEMO_POLICIES = frozenset({"first-fit", "best-fit", "fgd"})


def _shape(request: Request) -> _Shape:
    """Everything of a request that ``ClusterState.place`` and ``commit`` read, bar its id."""
    return (request.members, request.gpus_per_member, request.gpu_milli, request.gpu_models, request.cpu_milli,
            request.memory_mib, request.topology, request.topology_required)


def _try(work: ClusterState, request: Request, policy: str, seed: int) -> Placement | None:
    """The engine's placement of ``request`` now, or None (without trying when GPU counts already say no)."""
    if not work.could_fit(request):
        return None
    placement = work.place(request, policy, seed=seed)
    return placement if isinstance(placement, Placement) else None


def _ending_work(
    running: Sequence[RunningWorkload] | EndingQueue, started_requests: Sequence[Request],
    started: Sequence[Placement], now: float,
) -> Iterable[_Ending]:
    """Everything that will free GPUs at a known time, soonest first (overdue work counts as now)."""
    fresh: list[_Ending] = [
        (now + request.duration_estimate_s, request.id, placement, request)
        for request, placement in zip(started_requests, started, strict=True)
        if request.duration_estimate_s > 0
    ]
    if isinstance(running, EndingQueue):
        if not fresh:
            return running.ordered(now)
        fresh.sort(key=_END_ORDER)
        return heapq.merge(running.ordered(now), fresh, key=_END_ORDER)
    # Sorted by end first, converted only as the reservation search reaches them: it usually stops long
    # before the last of a large pool's running work (each conversion builds a placement and a request).
    keyed = sorted(((max(now, w.expected_end), w.id, w) for w in running
                    if w.expected_end is not None and w.assignments), key=_END_ORDER)
    converted = ((at, workload_id, *running_placement(workload)) for at, workload_id, workload in keyed)
    fresh.sort(key=_END_ORDER)
    return heapq.merge(fresh, converted, key=_END_ORDER)


def _reserve(
    work: ClusterState, head: Request, ending: Iterable[_Ending], policy: str, seed: int
) -> tuple[float, Placement, ClusterState] | None:
    """Earliest time the head fits as work ends; the shadow state holds the head's reservation."""
    shadow = work.copy()
    counter = work.release_counter(head)
    unreleased: list[tuple[Placement, Request]] = []
    for at, _id, placement, request in ending:
        unreleased.append((placement, request))
        if counter is not None and not counter.release(placement):
            continue  # the head cannot fit by GPU counts yet: release for real only once it might
        shadow.release_committed(unreleased)  # running work and jobs just started: committed on work
        unreleased.clear()
        attempt = _try(shadow, head, policy, seed)
        if attempt is not None:
            shadow.commit(attempt, head)
            return at, attempt, shadow
    return None


def _reserve_batched(
    work: ClusterState, head: Request, ending: Iterable[_Ending], elsewhere: Iterable[float], policy: str,
    seed: int,
) -> _Reservation | None:
    """Slurm 22.05's will-run walk (see the module doc): release in batches, reserve at the batch's last end."""
    # One walk over the cluster's running work by end: (end, 0, entry) for work here, (end, 1, None) elsewhere
    # (at equal ends, work here first).
    here = ((entry[0], 0, entry) for entry in ending)
    there = ((at, 1, None) for at in elsewhere)
    walk: list[tuple[float, int, _Ending | None]] = list(heapq.merge(here, there, key=itemgetter(0, 1)))
    shadow = work.copy()
    window, barrier = SLURM_WILL_RUN_WINDOW_S, None
    position = 0
    while position < len(walk):
        last: _Ending | None = None
        following: float | None = None  # the end of the job after the batch's last usable one
        while position < len(walk):
            at, _elsewhere, entry = walk[position]
            position += 1
            if entry is None:
                continue  # work on nodes the head cannot use: skipped, and no check of the batch's end
            if barrier is None:
                barrier = at + (window - math.fmod(at, window))
            last = entry
            shadow.release_committed([(entry[2], entry[3])])
            following = walk[position][0] if position < len(walk) else None
            if following is None or following > barrier + window:
                break
        if last is None:
            return None
        assert barrier is not None
        window *= 2
        while following is not None and following > barrier + window:
            window *= 2
        attempt = _try(shadow, head, policy, seed)
        if attempt is not None:
            shadow.commit(attempt, head)
            return last[0], attempt, shadow
    return None


def _may_backfill(
    request: Request, placement: Placement,
    reservation: tuple[float, Placement, ClusterState] | None, now: float, *, keep: bool = True,
) -> str:
    """Why ``request`` may start now without delaying the head, or "" if it may not. A placement still running
    at the reservation is committed on the shadow beside the head; ``keep=False`` only asks (no change)."""
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
    if not keep:
        shadow.release(placement, request)
    return "uses GPUs the head does not need at its reservation"
