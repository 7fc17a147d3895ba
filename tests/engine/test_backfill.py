from __future__ import annotations

from scheduling.engine.backfill import easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MemberAssignment, Node, Placement, Request, RunningWorkload, TopologyLevel

from .fleets import dgx

NOW = 0.0


def busy_fleet(end: float | None = 100.0, *, extra: list[Node] | None = None
               ) -> tuple[ClusterState, list[RunningWorkload]]:
    """Two 8-GPU H100 nodes (plus ``extra``); n0 is half busy until ``end``, n1 is idle."""
    state = ClusterState([dgx("n0"), dgx("n1"), *(extra or [])])
    old = RunningWorkload("old", "t", 4.0, (MemberAssignment(0, "n0", (0, 1, 2, 3)),), expected_end=end)
    state.commit(Placement("old", old.assignments, TopologyLevel.ANY), Request("old", gpus_per_member=4))
    return state, [old]


def test_easy_backfill_starts_a_short_job_that_ends_before_the_heads_reservation() -> None:
    state, running = busy_fleet(end=100.0)
    head = Request("head", members=2, gpus_per_member=8, duration_estimate_s=1_000)
    short = Request("short", gpus_per_member=4, duration_estimate_s=50)
    decision = easy_backfill(state, [head, short], running, NOW)
    assert decision.head_id == "head"
    assert decision.head_reservation_at == 100.0
    assert decision.started_ids == ("short",)


def test_easy_backfill_holds_back_a_long_job_that_would_delay_the_head() -> None:
    state, running = busy_fleet(end=100.0)
    head = Request("head", members=2, gpus_per_member=8, duration_estimate_s=1_000)
    long = Request("long", gpus_per_member=4, duration_estimate_s=500)
    decision = easy_backfill(state, [head, long], running, NOW)
    assert decision.started_ids == ()
    assert any("would delay the head" in reason for reason in decision.reasons)


def test_a_long_job_may_start_on_gpus_the_head_does_not_need() -> None:
    state, running = busy_fleet(end=100.0, extra=[dgx("a100", free=2, model="A100")])
    head = Request("head", members=2, gpus_per_member=8, gpu_models=frozenset({"H100"}), duration_estimate_s=1_000)
    long = Request("long", gpus_per_member=2, duration_estimate_s=5_000)  # best fit: the A100 node
    decision = easy_backfill(state, [head, long], running, NOW)
    assert decision.head_reservation_at == 100.0
    assert decision.started_ids == ("long",)
    assert any("does not need" in reason for reason in decision.reasons)


def test_queue_order_is_kept_while_jobs_fit() -> None:
    state, running = busy_fleet()
    queue = [Request("a", gpus_per_member=8), Request("b", gpus_per_member=4)]
    decision = easy_backfill(state, queue, running, NOW)
    assert decision.started_ids == ("a", "b")
    assert decision.head_id is None


def test_without_known_end_times_the_head_gets_no_reservation_and_says_so() -> None:
    state, running = busy_fleet(end=None)
    head = Request("head", members=2, gpus_per_member=8)
    small = Request("small", gpus_per_member=2)
    decision = easy_backfill(state, [head, small], running, NOW)
    assert decision.head_reservation_at is None
    assert decision.started_ids == ("small",)
    assert any("no reservation" in reason for reason in decision.reasons)


def test_the_caller_state_is_left_untouched() -> None:
    state, running = busy_fleet()
    before = state.nodes()
    easy_backfill(state, [Request("a", gpus_per_member=8)], running, NOW)
    assert state.nodes() == before
