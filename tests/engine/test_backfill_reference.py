"""The engine's EASY backfill (attempts remembered per request shape, release counter, ending queue) starts
exactly the jobs the plain reference implementation starts, on the same placements, on random fleets and
queues full of repeated shapes with different run times (where remembered attempts are reused)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import EasyPass, EndingQueue, easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import Node, Placement, Request, RunningWorkload

from .reference_backfill import reference_easy_backfill

POLICIES = ("best-fit", "first-fit", "fgd", "random")
Situation = tuple[ClusterState, list[RunningWorkload], list[Request], float, str]


def _node(i: int, gpus: int) -> Node:
    return Node(name=f"n{i}", gpu_total=gpus, gpu_model="A100" if i % 3 else "H100", nvlink_domain=f"n{i}",
                leaf_switch=f"leaf{i % 2}", spine="spine0", cpu_milli_total=64_000 if i % 2 else 0,
                cpu_milli_free=64_000 if i % 2 else 0)


@st.composite
def situations(draw: st.DrawFn) -> Situation:
    state = ClusterState([_node(i, draw(st.sampled_from((4, 8)))) for i in range(draw(st.integers(1, 6)))])
    now = draw(st.sampled_from((0.0, 100.0)))
    running: list[RunningWorkload] = []
    for i in range(draw(st.integers(0, 16))):
        shared = draw(st.integers(0, 4)) == 0
        request = Request(f"run{i}", members=draw(st.integers(1, 2)),
                          gpus_per_member=0 if shared else draw(st.sampled_from((1, 2, 4))),
                          gpu_milli=draw(st.sampled_from((250, 500))) if shared else 0)
        placement = state.place(request, "first-fit")
        if isinstance(placement, Placement):
            state.commit(placement, request)
            end = draw(st.one_of(st.none(), st.integers(0, 400).map(float)))
            running.append(RunningWorkload(request.id, "t", request.gpus, placement.assignments, expected_end=end))
    # A few shapes, many jobs each: the case the engine's remembered attempts are for.
    shapes = draw(st.lists(st.tuples(st.integers(1, 2), st.sampled_from((0, 1, 2, 4, 8)),
                                     st.sampled_from((0, 8_000)), st.booleans()), min_size=1, max_size=3))
    queue = []
    for i in range(draw(st.integers(1, 24))):
        members, gpus, cpu, a100_only = draw(st.sampled_from(shapes))
        queue.append(Request(
            f"q{i}", members=1 if not gpus else members, gpus_per_member=gpus, gpu_milli=0 if gpus else 500,
            cpu_milli=cpu, gpu_models=frozenset({"A100"}) if a100_only else frozenset(),
            duration_estimate_s=draw(st.sampled_from((0.0, 10.0, 150.0, 300.0, 5_000.0)))))
    return state, running, queue, now, draw(st.sampled_from(POLICIES))


@settings(max_examples=400, deadline=None)
@given(situations())
def test_the_engine_starts_what_the_plain_reference_starts(situation: Situation) -> None:
    state, running, queue, now, policy = situation
    expected = reference_easy_backfill(state, queue, running, now, policy=policy, seed=3)
    for given_running in (running, EndingQueue(running)):
        decision = easy_backfill(state, queue, given_running, now, policy=policy, seed=3)
        assert list(decision.start_now) == expected
        # A pass read only for its starts (the head's reservation left unsettled when nobody needs it).
        easy = EasyPass(state, given_running, now, policy=policy, seed=3)
        easy.feed(queue)
        assert list(easy.started()) == expected
        assert easy.decision() == decision  # settling afterwards gives the full decision, reasons included


def test_a_remembered_placement_is_handed_out_under_each_jobs_own_id() -> None:
    state = ClusterState([_node(0, 8), _node(1, 8)])
    blocker = Request("big", gpus_per_member=8)
    first = state.place(blocker, "best-fit")
    assert isinstance(first, Placement)
    state.commit(first, blocker)
    running = [RunningWorkload("big", "t", 8.0, first.assignments, expected_end=1_000.0)]
    queue = [Request("head", members=2, gpus_per_member=8), *(
        Request(f"small{i}", duration_estimate_s=10.0) for i in range(3))]
    decision = easy_backfill(state, queue, running, 0.0, policy="fgd")
    assert [placement.request_id for placement in decision.start_now] == ["small0", "small1", "small2"]
    assert decision.start_now == tuple(reference_easy_backfill(state, queue, running, 0.0, policy="fgd"))
