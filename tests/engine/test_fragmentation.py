from __future__ import annotations

import pytest

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
