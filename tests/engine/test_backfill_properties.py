from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import running_placement
from scheduling.engine.types import Placement, Request, RunningWorkload

from .fleets import dgx

NOW = 0.0


@st.composite
def situations(draw: st.DrawFn) -> tuple[ClusterState, list[RunningWorkload], list[Request]]:
    state = ClusterState([dgx(f"n{i}", leaf=f"leaf{i % 2}") for i in range(4)])
    running: list[RunningWorkload] = []
    for i in range(draw(st.integers(0, 10))):
        request = Request(f"run{i}", gpus_per_member=draw(st.sampled_from((1, 2, 4, 8))))
        placement = state.place(request, "first-fit")
        if isinstance(placement, Placement):
            state.commit(placement, request)
            end = draw(st.one_of(st.none(), st.floats(1, 1_000)))
            running.append(RunningWorkload(request.id, "t", request.gpus, placement.assignments, expected_end=end))
    queue = [Request(f"q{i}", members=draw(st.integers(1, 3)), gpus_per_member=draw(st.sampled_from((1, 2, 4, 8))),
                     duration_estimate_s=draw(st.sampled_from((0.0, 10.0, 100.0, 5_000.0)))) for i in range(6)]
    return state, running, queue


@settings(max_examples=120, deadline=None)
@given(situations())
def test_backfilled_jobs_never_take_the_heads_reserved_gpus(
    situation: tuple[ClusterState, list[RunningWorkload], list[Request]],
) -> None:
    state, running, queue = situation
    decision = easy_backfill(state, queue, running, NOW)
    by_id = {request.id: request for request in queue}
    now_state = state.copy()
    for placement in decision.start_now:  # everything started fits together now
        now_state.commit(placement, by_id[placement.request_id])
    if decision.head_reservation_at is None or decision.head_id is None:
        return
    at = decision.head_reservation_at
    # At the reservation: known-ending work and short backfilled jobs are gone; the head must fit.
    later = state.copy()
    for workload in running:
        if workload.expected_end is not None and workload.expected_end <= at:
            later.release(*running_placement(workload))
    for placement in decision.start_now:
        request = by_id[placement.request_id]
        if not (request.duration_estimate_s > 0 and NOW + request.duration_estimate_s <= at):
            later.commit(placement, request)
    head = by_id[decision.head_id]
    assert isinstance(later.place(head, "best-fit"), Placement)
