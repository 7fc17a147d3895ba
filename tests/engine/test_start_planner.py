"""StartPlanner / StartPlans: many start estimates against one snapshot equal a fresh plain estimate each.

The reference below is the module docstring's three steps done the plain way for one workload: its own
EASY pass over the queue up to it, its own drain, its own walk of the team's running work. The planner
answers a stream from stopped passes and sorted ends; it must give the same answer for every workload,
in any order, however often it is asked (a peek that changed the stopped pass would show on a repeat).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import EasyPass, easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot, StartEstimate, StartPlans, estimate_start
from scheduling.engine.types import MemberAssignment, Request, RunningWorkload

from .fleets import dgx, filling_work
from .test_explain import naive_drain

NOW = 1_000.0


def queue_with(request: Request, queue: tuple[Request, ...]) -> tuple[tuple[Request, ...], int]:
    """The queue holding ``request`` and its index: where it is, or after every entry of its priority or higher."""
    for index, queued in enumerate(queue):
        if queued.id == request.id:
            return queue, index
    index = next((i for i, queued in enumerate(queue) if queued.priority < request.priority), len(queue))
    return (*queue[:index], request, *queue[index:]), index


def reference_estimate(request: Request, pool: PoolSnapshot, now: float) -> StartEstimate:
    queue, index = queue_with(request, pool.queue)
    floor = max(now, pool.not_before)

    def estimate(at: float | None, basis: str) -> StartEstimate:
        return StartEstimate(pool.orchestrator, None if at is None else max(at, floor), index + 1, index,
                             sum(queued.gpus for queued in queue[:index]), basis)

    cap = pool.team_cap.get(request.team)
    over = 0.0 if cap is None else pool.team_in_use.get(request.team, 0.0) + request.gpus - cap
    if over > 0:
        if request.gpus > cap:
            return estimate(None, "quota")
        for end, gpus in sorted((w.expected_end, w.gpus) for w in pool.running
                                if w.team == request.team and w.expected_end is not None):
            over -= gpus
            if over <= 0:
                if end > now:
                    return estimate(end, "quota")
                break
        else:
            return estimate(None, "quota")
    decision = easy_backfill(ClusterState(pool.nodes), queue[:index + 1], pool.running, now)
    if request.id in decision.started_ids:
        head_ahead = decision.head_id is not None and [q.id for q in queue].index(decision.head_id) < index
        return estimate(now, "backfill" if head_ahead else "now")
    if decision.head_id == request.id:
        at = decision.head_reservation_at
        return estimate(at, "reservation" if at is not None else "unknown")
    capacity = sum(node.gpu_total for node in pool.nodes if node.schedulable)
    drained = naive_drain(ClusterState(pool.nodes).gpu_free, capacity, list(queue[:index + 1]), pool.running, now)
    if drained is None:
        return estimate(None, "unknown")
    return estimate(max(drained, decision.head_reservation_at or now), "drain")


SIZES = st.tuples(st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 2), st.sampled_from([0, 600, 7200]),
                  st.integers(0, 3), st.sampled_from(["t", "u"]))


def request_of(name: str, size: tuple[int, int, int, int, str]) -> Request:
    per_member, members, duration, priority, team = size
    members = 1 if per_member > 8 else members
    return Request(name, members=members, gpus_per_member=min(per_member, 8) if members > 1 else per_member,
                   duration_estimate_s=duration, priority=priority, team=team)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    free=st.lists(st.integers(0, 8), min_size=1, max_size=5),
    ends=st.lists(st.sampled_from([None, 300.0, 3_600.0, 500.0]), max_size=5),
    queued=st.lists(SIZES, max_size=10),
    arriving=st.lists(SIZES, min_size=1, max_size=8),
)
def test_a_stream_of_estimates_from_one_plan_equals_a_plain_estimate_each(data, free, ends, queued, arriving):
    nodes = tuple(dgx(f"n{i}", free=f) for i, f in enumerate(free))
    running = filling_work(free, ends, NOW, teams="tu")
    queue = tuple(sorted((request_of(f"q{i}", size) for i, size in enumerate(queued)), key=lambda r: -r.priority))
    if data.draw(st.booleans()):  # a fair-share order need not be sorted by priority
        queue = tuple(data.draw(st.permutations(queue)))
    pool = PoolSnapshot("slurm", nodes, queue=queue, running=running,
                        team_in_use={"t": sum(w.gpus for w in running if w.team == "t"), "u": 4.0},
                        team_cap=data.draw(st.sampled_from([{}, {"t": 16.0}, {"t": 8.0, "u": 12.0}])),
                        not_before=data.draw(st.sampled_from([0.0, NOW + 900])))
    stream = [request_of(f"new{i}", size) for i, size in enumerate(arriving)]
    stream += data.draw(st.lists(st.sampled_from(queue), max_size=4)) if queue else []
    stream += data.draw(st.lists(st.sampled_from(stream), max_size=4))  # asked again, after others
    plans = StartPlans(NOW)
    for request in data.draw(st.permutations(stream)):
        assert plans.estimate(request, pool) == reference_estimate(request, pool, NOW), request


def test_a_workload_joins_after_every_entry_of_its_priority_or_higher_in_an_unsorted_queue() -> None:
    queue = tuple(Request(f"q{i}", gpus_per_member=1, priority=p) for i, p in enumerate([3, 1, 2, 0]))
    pool = PoolSnapshot("slurm", (dgx("n0", free=0),), queue=queue)
    plans = StartPlans(NOW)
    positions = {p: plans.estimate(Request(f"new{p}", gpus_per_member=1, priority=p), pool).position
                 for p in range(5)}
    assert positions == {0: 5, 1: 4, 2: 2, 3: 2, 4: 1}  # before q1 (priority 1), the first lower than 2 or 3


def test_plans_answer_each_pool_from_its_own_snapshot() -> None:
    busy = PoolSnapshot("slurm", (dgx("s0", free=0),),
                        running=(RunningWorkload("r", "t", 8.0, (MemberAssignment(0, "s0", tuple(range(8))),),
                                                 expected_end=NOW + 3_600),))
    idle = PoolSnapshot("kubernetes", (dgx("k0"),))
    job = Request("job", gpus_per_member=4)
    plans = StartPlans(NOW)
    assert plans.estimate(job, busy).start_at == NOW + 3_600
    assert plans.estimate(job, idle).start_at == NOW
    assert plans.estimate(job, busy) == estimate_start(job, busy, NOW)


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    free=st.lists(st.integers(0, 8), min_size=1, max_size=4),
    ends=st.lists(st.sampled_from([None, 300.0, 3_600.0]), max_size=4),
    queued=st.lists(SIZES, max_size=10),
)
def test_a_pass_fed_in_pieces_decides_as_one_pass_over_the_whole_queue(data, free, ends, queued) -> None:
    nodes = tuple(dgx(f"n{i}", free=f) for i, f in enumerate(free))
    running = filling_work(free, ends, NOW)
    queue = [request_of(f"q{i}", size) for i, size in enumerate(queued)]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(queue)), max_size=3)))
    easy = EasyPass(ClusterState(nodes), running, NOW)
    for start, end in zip([0, *cuts], [*cuts, len(queue)], strict=True):
        easy.feed(queue[start:end])
    assert easy.decision() == easy_backfill(ClusterState(nodes), queue, running, NOW)
