"""The incremental path of EASY backfill (an ``EndingQueue`` kept by the caller) decides exactly what the
from-scratch path (the list of running workloads) decides, on randomised fleets, running sets and queues."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import EndingQueue, easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import running_placement
from scheduling.engine.types import Node, Placement, Request, RunningWorkload

POLICIES = ("best-fit", "first-fit", "fgd")


def _node(i: int, gpus: int) -> Node:
    return Node(name=f"n{i}", gpu_total=gpus, gpu_model="A100" if i % 3 else "H100", nvlink_domain=f"n{i}",
                leaf_switch=f"leaf{i % 2}", spine="spine0")


@st.composite
def situations(draw: st.DrawFn) -> tuple[ClusterState, list[RunningWorkload], list[Request], float, str]:
    state = ClusterState([_node(i, draw(st.sampled_from((4, 8)))) for i in range(draw(st.integers(1, 6)))])
    now = draw(st.sampled_from((0.0, 50.0, 500.0)))
    running: list[RunningWorkload] = []
    for i in range(draw(st.integers(0, 14))):
        shared = draw(st.integers(0, 4)) == 0
        whole = 0 if shared else draw(st.sampled_from((1, 2, 4)))
        milli = draw(st.sampled_from((250, 500))) if shared else 0
        request = Request(f"run{i}", members=draw(st.integers(1, 2)), gpus_per_member=whole, gpu_milli=milli)
        placement = state.place(request, "first-fit")
        if isinstance(placement, Placement):
            state.commit(placement, request)
            # integer-valued ends make ties (and overdue work, end <= now) common
            end = draw(st.one_of(st.none(), st.integers(0, 1_000).map(float)))
            running.append(RunningWorkload(request.id, "t", request.gpus, placement.assignments, expected_end=end))
    queue = []
    for i in range(draw(st.integers(1, 8))):
        shared = draw(st.integers(0, 5)) == 0
        queue.append(Request(
            f"q{i}", members=1 if shared else draw(st.integers(1, 3)),
            gpus_per_member=0 if shared else draw(st.sampled_from((1, 2, 4, 8))),
            gpu_milli=500 if shared else 0,
            gpu_models=draw(st.sampled_from((frozenset(), frozenset({"A100"})))),
            duration_estimate_s=draw(st.sampled_from((0.0, 10.0, 100.0, 5_000.0)))))
    return state, running, queue, now, draw(st.sampled_from(POLICIES))


@settings(max_examples=300, deadline=None)
@given(situations(), st.randoms(use_true_random=False))
def test_an_ending_queue_kept_incrementally_gives_the_same_decision_as_the_running_list(
    situation: tuple[ClusterState, list[RunningWorkload], list[Request], float, str], shuffler: object,
) -> None:
    state, running, queue, now, policy = situation
    # Built the way a caller keeps it: added in some order, with work that stopped removed again.
    ending = EndingQueue()
    order = list(running)
    shuffler.shuffle(order)  # type: ignore[attr-defined]
    stopped = RunningWorkload("gone", "t", 1.0, running[0].assignments, expected_end=1.0) if running else None
    for workload in order:
        ending.add(workload)
        if stopped is not None and workload is order[0]:
            ending.add(stopped)
    if stopped is not None:
        ending.remove(stopped.id)
    assert len(ending) == sum(1 for w in running if w.expected_end is not None and w.assignments)

    from_scratch = easy_backfill(state, queue, running, now, policy=policy)
    incremental = easy_backfill(state, queue, ending, now, policy=policy)
    assert incremental == from_scratch


def test_overdue_work_is_released_first_in_id_order_then_by_expected_end() -> None:
    state = ClusterState([_node(i, 8) for i in range(3)])
    running = []
    for i, end in enumerate((300.0, 50.0, 10.0)):
        request = Request(f"w{2 - i}", gpus_per_member=8)
        placement = state.place(request, "first-fit")
        assert isinstance(placement, Placement)
        state.commit(placement, request)
        running.append(RunningWorkload(request.id, "t", 8.0, placement.assignments, expected_end=end))
    ending = EndingQueue(running)
    assert [(at, wid) for at, wid, _p, _r in ending.ordered(100.0)] == [(100.0, "w0"), (100.0, "w1"), (300.0, "w2")]
    released = state.copy()
    released.release_all([running_placement(w) for w in running])
    assert released.gpu_free == 24


def test_release_all_refuses_a_double_release_and_changes_nothing() -> None:
    state = ClusterState([_node(0, 8)])
    request = Request("a", gpus_per_member=4)
    placement = state.place(request, "first-fit")
    assert isinstance(placement, Placement)
    state.commit(placement, request)
    try:
        state.release_all([(placement, request), (placement, request)])
    except ValueError:
        pass
    else:
        raise AssertionError("a double release must be refused")
    assert state.gpu_free == 4


def test_could_fit_says_no_only_when_placement_fails() -> None:
    state = ClusterState([_node(0, 8), _node(1, 4)])
    for members, gpus in ((1, 8), (2, 4), (3, 4), (2, 8), (1, 16), (13, 1)):
        request = Request(f"r{members}x{gpus}", members=members, gpus_per_member=gpus)
        if not state.could_fit(request):
            assert not isinstance(state.place(request, "best-fit"), Placement)
    assert not state.could_fit(Request("big", members=2, gpus_per_member=8))
    assert state.could_fit(Request("ok", members=3, gpus_per_member=4))


def _reservation_the_slow_way(
    state: ClusterState, queue: list[Request], running: list[RunningWorkload], now: float, policy: str,
) -> float | None:
    """EASY's reservation by definition: start the queue in order, then release ending work one job at a
    time (soonest first, overdue as now) and ask placement after every release."""
    work = state.copy()
    ending = [(max(now, w.expected_end), w.id, *running_placement(w)) for w in running
              if w.expected_end is not None and w.assignments]
    head: Request | None = None
    for request in queue:
        placement = work.place(request, policy)
        if not isinstance(placement, Placement):
            head = request
            break
        work.commit(placement, request)
        if request.duration_estimate_s > 0:
            ending.append((now + request.duration_estimate_s, request.id, placement, request))
    if head is None:
        return None
    ending.sort(key=lambda item: (item[0], item[1]))
    for at, _id, placement, request in ending:
        work.release(placement, request)
        if isinstance(work.place(head, policy), Placement):
            return at
    return None


@settings(max_examples=200, deadline=None)
@given(situations())
def test_the_head_reservation_is_the_first_release_after_which_the_head_fits(
    situation: tuple[ClusterState, list[RunningWorkload], list[Request], float, str],
) -> None:
    state, running, queue, now, policy = situation
    decision = easy_backfill(state, queue, EndingQueue(running), now, policy=policy)
    assert decision.head_reservation_at == _reservation_the_slow_way(state, queue, running, now, policy)
