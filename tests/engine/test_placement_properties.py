from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine._topology import level_rank, topology_keys
from scheduling.engine.fragmentation import fragmented_gpus
from scheduling.engine.placement import POLICIES, ClusterState, Shape
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Request, TopologyLevel

from .strategies import fleets, requests

FAST = settings(max_examples=150, deadline=None)
LIGHT = settings(max_examples=100, deadline=None)  # for tests whose examples are costly to generate


def assert_nothing_over_allocated(state: ClusterState) -> None:
    for node in state.nodes():
        assert all(0 <= milli <= MILLI_PER_GPU for milli in node.free_milli())
        assert node.cpu_milli_free >= 0
        if node.cpu_milli_total:
            assert node.cpu_milli_free <= node.cpu_milli_total


def assert_placement_respects_request(nodes: list[Node], placement: Placement, request: Request) -> None:
    by_name = {node.name: node for node in nodes}
    assert len(placement.assignments) == request.members  # the whole gang, never part of it
    for assignment in placement.assignments:
        node = by_name[assignment.node]
        assert node.schedulable
        assert not request.gpu_models or node.gpu_model in request.gpu_models
        expected = 1 if request.gpu_milli else request.gpus_per_member
        assert len(set(assignment.gpu_indices)) == expected
    if request.topology_required and request.topology is not TopologyLevel.ANY:
        keys = topology_keys(nodes)[request.topology]
        index = {node.name: i for i, node in enumerate(nodes)}
        assert len({keys[index[name]] for name in placement.nodes}) == 1
        assert level_rank(placement.topology) <= level_rank(request.topology)


@FAST
@given(fleets(), st.lists(st.tuples(requests(), st.sampled_from(POLICIES), st.integers(0, 9)), max_size=12),
       st.data())
def test_gpus_are_never_over_allocated_after_any_place_commit_release_sequence(
    nodes: list[Node], steps: list[tuple[Request, str, int]], data: st.DataObject
) -> None:
    state = ClusterState(nodes, size_mix={1: 2, 2: 1, 0.5: 1})
    baseline = state.gpu_allocated_milli
    running: list[tuple[Placement, Request]] = []
    for i, (request, policy, seed) in enumerate(steps):
        request = replace(request, id=f"r{i}")
        if running and data.draw(st.booleans()):
            placement, done = running.pop(data.draw(st.integers(0, len(running) - 1)))
            state.release(placement, done)
        result = state.place(request, policy, seed=seed)
        if isinstance(result, Placement):
            assert_placement_respects_request(nodes, result, request)
            state.commit(result, request)  # a decision is always committable
            running.append((result, request))
        assert_nothing_over_allocated(state)
    for placement, request in running:
        state.release(placement, request)
    assert state.gpu_allocated_milli == baseline


@FAST
@given(fleets(), requests(), st.sampled_from(POLICIES), st.integers(0, 5))
def test_decisions_are_deterministic_for_a_seed(
    nodes: list[Node], request: Request, policy: str, seed: int
) -> None:
    first = ClusterState(nodes, {1: 1, 8: 1}).place(request, policy, seed=seed)
    second = ClusterState(nodes, {1: 1, 8: 1}).place(request, policy, seed=seed)
    assert first == second


@FAST
@given(fleets(), requests())
def test_a_rejected_gang_leaves_the_state_untouched(nodes: list[Node], request: Request) -> None:
    state = ClusterState(nodes)
    before = state.nodes()
    result = state.place(request, "best-fit")
    assert state.nodes() == before
    if not isinstance(result, Placement):
        assert result.constraint in {"gpu_model", "topology", "capacity", "cpu", "memory"}
        assert 0 <= result.unusable_free_gpus <= result.free_gpus


@LIGHT
@given(fleets(), st.dictionaries(st.sampled_from((0.25, 0.5, 1, 2, 4, 8)), st.floats(0.1, 10), min_size=1))
def test_fragmentation_is_zero_on_empty_and_on_full_fleets(
    nodes: list[Node], mix: dict[float, float]
) -> None:
    empty = [Node(n.name, n.gpu_total, n.gpu_model) for n in nodes]
    full = [Node(n.name, n.gpu_total, n.gpu_model, gpu_free_milli=(0,) * n.gpu_total) for n in nodes]
    assert fragmented_gpus(empty, mix) == 0.0
    assert fragmented_gpus(full, mix) == 0.0
    assert 0.0 <= fragmented_gpus(nodes, mix) <= sum(sum(n.free_milli()) for n in nodes) / MILLI_PER_GPU


@LIGHT
@given(fleets(), requests(), st.integers(0, 9))
def test_the_single_member_random_fast_path_decides_like_the_general_path(
    nodes: list[Node], request: Request, seed: int
) -> None:
    single = replace(request, members=1)
    state = ClusterState(nodes)
    reference = ClusterState(nodes)
    shape = Shape.of(single)
    allowed = reference._allowed_models(single)
    if not allowed:
        return  # both answer from the model check before any path
    # The general path is the reference: the fast path must take exactly its decision.
    expected = reference._place_general(single, shape, allowed, "random", random.Random(f"{seed}:{single.id}"))
    assert state.place(single, "random", seed=seed) == expected
