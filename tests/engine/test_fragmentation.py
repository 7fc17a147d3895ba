from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.fragmentation import (
    fragmentation_report,
    fragmented_gpus,
    largest_placeable,
    node_fragmentation,
)
from scheduling.engine.types import Node

from .fleets import dgx


def shared(name: str, free: tuple[int, ...]) -> Node:
    return Node(name=name, gpu_total=len(free), gpu_free_milli=free)


def test_an_empty_fleet_has_no_fragmentation() -> None:
    assert fragmented_gpus([dgx("a"), dgx("b")], {1: 1, 2: 1, 8: 1}) == 0.0


def test_a_full_fleet_has_no_fragmentation() -> None:
    assert fragmented_gpus([dgx("a", free=0)], {1: 1, 8: 1}) == 0.0


def test_free_gpus_too_few_for_the_only_size_are_all_fragmented() -> None:
    assert node_fragmentation(dgx("a", free=3), {4: 1}) == 3.0


def test_fragmentation_is_the_expectation_over_the_mix() -> None:
    # 3 free GPUs: a 4-GPU member cannot use any, a 1-GPU member can use all.
    assert node_fragmentation(dgx("a", free=3), {4: 1, 1: 3}) == pytest.approx(0.75)


def test_partially_used_gpus_are_fragments_for_whole_gpu_requests() -> None:
    node = shared("s", (400, 1000))
    assert node_fragmentation(node, {1: 1}) == pytest.approx(0.4)
    assert node_fragmentation(node, {0.4: 1}) == 0.0
    assert node_fragmentation(node, {0.5: 1}) == pytest.approx(0.4)


def test_sizes_larger_than_a_node_do_not_count_against_it() -> None:
    assert node_fragmentation(dgx("a"), {16: 1}) == 0.0


def test_unschedulable_nodes_are_not_fragmented_just_drained() -> None:
    assert node_fragmentation(dgx("a", free=3, schedulable=False), {4: 1}) == 0.0


def test_largest_placeable_counts_gangs_of_eight_gpu_members() -> None:
    nodes = [dgx("a"), dgx("b"), dgx("c", free=4), dgx("d", free=3)]
    counts = largest_placeable(nodes)
    assert counts[1] == 23
    assert counts[4] == 5
    assert counts[8] == 2
    assert counts[16] == 1
    assert counts[32] == 0


def test_the_report_totals_agree_with_the_parts() -> None:
    nodes = [dgx("a", free=3), dgx("b", free=5), dgx("c")]
    report = fragmentation_report(nodes, {4: 1})
    assert report.per_node == {"a": 3.0, "b": 0.0, "c": 0.0}  # b still fits one 4-GPU member
    assert report.per_nvlink_domain["a"] == 3.0
    assert report.fragmented_gpus == 3.0
    assert report.free_gpus == 16.0
    assert report.fragmented_fraction == 3 / 16


def test_a_gang_is_placeable_only_within_one_orchestrator_and_gpu_model() -> None:
    """Issue 33 item 5: four free hosts on each of two orchestrators are not a 64-GPU gang (no scheduler
    starts one across both), nor are H100 and A100 hosts of one orchestrator."""
    from dataclasses import replace

    slurm = [replace(dgx(f"s{i}"), orchestrator="slurm-hpc") for i in range(4)]
    ray = [replace(dgx(f"r{i}", model="A100"), orchestrator="ray-sweeps") for i in range(4)]
    mixed = [replace(dgx(f"k{i}", model=model), orchestrator="k8s") for i, model in enumerate(("H100", "A100"))]
    counts = largest_placeable(slurm + ray + mixed)
    assert counts[32] == 2 and counts[64] == 0
    assert counts[16] == 4  # two per four-host pool; the two single k8s hosts make none
    assert counts[8] == 10


@given(st.lists(st.tuples(st.sampled_from(("a", "b", "c")), st.sampled_from(("H100", "A100")),
                          st.integers(0, 8)), max_size=30))
def test_the_fleets_gangs_are_the_sum_of_each_pools(hosts) -> None:
    """No gang counted fleet-wide that no single pool can start: counts add up over (orchestrator, model)."""
    from dataclasses import replace

    nodes = [replace(dgx(f"n{i}", free, model=model), orchestrator=orch) for i, (orch, model, free) in
             enumerate(hosts)]
    whole = largest_placeable(nodes)
    pools = {(n.orchestrator, n.gpu_model) for n in nodes}
    parts = [largest_placeable([n for n in nodes if (n.orchestrator, n.gpu_model) == pool]) for pool in pools]
    assert whole == {size: sum(p[size] for p in parts) for size in whole}
