"""The ``slurm-22.05`` reservation rule: Slurm 22.05's will-run batches (engine/backfill.py, docs/simulator.md §4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import BackfillMemory, EndingQueue, easy_backfill
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MemberAssignment, Placement, Request, RunningWorkload, TopologyLevel

from .fleets import dgx
from .test_backfill_properties import situations

NOW = 0.0


def one_gpu_jobs(state: ClusterState, node: str, ends: list[float], first: int = 0) -> list[RunningWorkload]:
    running = []
    for offset, end in enumerate(ends):
        index = first + offset
        workload = RunningWorkload(f"{node}-{index}", "t", 1.0, (MemberAssignment(0, node, (index,)),),
                                   expected_end=end)
        state.commit(Placement(workload.id, workload.assignments, TopologyLevel.ANY), Request(workload.id))
        running.append(workload)
    return running


def partition_like_p2() -> tuple[ClusterState, list[RunningWorkload]]:
    """The measured case, in small: n1 holds two 1-GPU jobs ending at 62 (its earliest fit for an 8-GPU
    head); n0 is full, six jobs ending at 50 and two at 200."""
    state = ClusterState([dgx("n0"), dgx("n1")])
    running = one_gpu_jobs(state, "n0", [50.0] * 6 + [200.0, 200.0])
    running += one_gpu_jobs(state, "n1", [62.0, 62.0])
    return state, running


HEAD = Request("head", gpus_per_member=8, duration_estimate_s=180)
SMALL = Request("small", gpus_per_member=1, duration_estimate_s=100)


def test_earliest_reserves_the_head_when_n1_frees() -> None:
    state, running = partition_like_p2()
    decision = easy_backfill(state, [HEAD], running, NOW)
    assert (decision.head_reservation_at, decision.head_reservation_nodes) == (62.0, ("n1",))


def test_slurm_2205_batches_alone_reserve_at_the_batchs_last_end() -> None:
    # First usable end 50 -> barrier 60; the batch runs while the next end is <= 90: 50 x6, 62, 62.
    state, running = partition_like_p2()
    decision = easy_backfill(state, [HEAD], running, NOW, reservation="slurm-22.05")
    assert decision.head_reservation_at == 62.0


def test_work_elsewhere_ending_inside_the_window_makes_the_batch_overshoot() -> None:
    # After the last job at 62 the walk reads a job of another partition ending at 63 (<= 90): the batch
    # stays open, skips it, and takes the next usable job (200) whatever its end. The head is reserved
    # at 200, not at 62 when it first fits, as in slurmctld's log (JobId=216 to start at 14:05:51).
    state, running = partition_like_p2()
    decision = easy_backfill(state, [HEAD], running, NOW, reservation="slurm-22.05", elsewhere=[63.0])
    assert (decision.head_reservation_at, decision.head_reservation_nodes) == (200.0, ("n1",))
    # ... and work elsewhere ending after the window changes nothing.
    later = easy_backfill(state, [HEAD], running, NOW, reservation="slurm-22.05", elsewhere=[91.0])
    assert later.head_reservation_at == 62.0


def test_the_later_reservation_lets_a_small_job_backfill_onto_the_heads_node() -> None:
    state, running = partition_like_p2()
    earliest = easy_backfill(state, [HEAD, SMALL], running, NOW)
    slurm = easy_backfill(state, [HEAD, SMALL], running, NOW, reservation="slurm-22.05", elsewhere=[63.0])
    assert earliest.started_ids == ()  # it would end at 100, after the reservation at 62
    assert slurm.started_ids == ("small",)  # ends at 100, before the reservation at 200


def test_windows_double_until_they_reach_the_next_job() -> None:
    # One usable job per batch: ends 10 (barrier 30, window 30 -> next 100 > 60: closes; window 60, 120),
    # then 100 (<= 30 + 120) ... the head fits only once both n1 jobs are gone.
    state = ClusterState([dgx("n1")])
    running = one_gpu_jobs(state, "n1", [10.0, 100.0])
    decision = easy_backfill(state, [HEAD], running, NOW, reservation="slurm-22.05")
    assert decision.head_reservation_at == 100.0


def test_an_ending_queue_gives_the_same_decision_and_the_memory_is_not_used() -> None:
    state, running = partition_like_p2()
    memory = BackfillMemory()
    listed = easy_backfill(state, [HEAD, SMALL], running, NOW, reservation="slurm-22.05", elsewhere=[63.0])
    queued = easy_backfill(state, [HEAD, SMALL], EndingQueue(running), NOW, reservation="slurm-22.05",
                           elsewhere=[63.0], memory=memory)
    assert listed == queued
    assert memory.key is None


def test_an_unknown_rule_is_refused() -> None:
    state, running = partition_like_p2()
    with pytest.raises(ValueError, match="unknown reservation rule"):
        easy_backfill(state, [HEAD], running, NOW, reservation="latest")


@settings(max_examples=150, deadline=None)
@given(situations(), st.lists(st.integers(1, 1_000).map(float), max_size=8).map(sorted))
def test_slurm_2205_never_reserves_before_the_earliest_fit_and_only_at_a_running_jobs_end(
    situation: tuple[ClusterState, list[RunningWorkload], list[Request]], elsewhere: list[float],
) -> None:
    state, running, queue = situation
    head = queue[0]
    earliest = easy_backfill(state, [head], running, NOW)
    slurm = easy_backfill(state, [head], running, NOW, reservation="slurm-22.05", elsewhere=elsewhere)
    assert (earliest.head_id is None) == (slurm.head_id is None)
    # The batches release every job by end, so the head gets a reservation under both rules or neither.
    assert (earliest.head_reservation_at is None) == (slurm.head_reservation_at is None)
    if slurm.head_reservation_at is not None:
        assert earliest.head_reservation_at is not None
        assert slurm.head_reservation_at >= earliest.head_reservation_at
        assert slurm.head_reservation_at in {w.expected_end for w in running}
