from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.engine.placement import POLICIES, ClusterState, place
from scheduling.engine.types import Node, Placement, Rejection, Request, TopologyLevel

from .fleets import dgx, two_tier_fleet


def placed(result: Placement | Rejection) -> Placement:
    assert isinstance(result, Placement), result
    return result


def rejected(result: Placement | Rejection) -> Rejection:
    assert isinstance(result, Rejection), result
    return result


def test_best_fit_fills_the_fuller_node() -> None:
    nodes = [dgx("empty", free=8), dgx("half", free=4), dgx("almost", free=1)]
    result = placed(place(nodes, Request("r", gpus_per_member=2), "best-fit"))
    assert result.nodes == ("half",)


def test_first_fit_takes_the_first_node_that_fits() -> None:
    nodes = [dgx("a", free=1), dgx("b", free=8), dgx("c", free=2)]
    assert placed(place(nodes, Request("r", gpus_per_member=2), "first-fit")).nodes == ("b",)


def test_a_member_gets_distinct_free_gpus() -> None:
    nodes = [dgx("half", free=4)]
    result = placed(place(nodes, Request("r", gpus_per_member=3)))
    assert result.assignments[0].gpu_indices == (4, 5, 6)


def test_fgd_keeps_a_whole_node_free_for_the_eight_gpu_jobs_it_has_seen() -> None:
    # Best fit and FGD agree here, but first fit would break the empty node.
    nodes = [dgx("empty", free=8), dgx("six", free=6)]
    state = ClusterState(nodes, size_mix={8: 10, 2: 1})
    result = placed(state.place(Request("r", gpus_per_member=2), "fgd"))
    assert result.nodes == ("six",)


def test_fgd_avoids_leaving_a_stranded_gpu_that_best_fit_would_leave() -> None:
    # With only 2-GPU work expected, taking 2 of 3 free GPUs strands one; taking 2 of 4 strands none.
    nodes = [dgx("three", free=3), dgx("four", free=4)]
    state = ClusterState(nodes, size_mix={2: 1})
    assert placed(state.place(Request("r", gpus_per_member=2), "best-fit")).nodes == ("three",)
    assert placed(state.place(Request("r", gpus_per_member=2), "fgd")).nodes == ("four",)


def test_fgd_packs_shared_gpu_requests_onto_an_already_shared_gpu() -> None:
    shared = replace(dgx("shared"), gpu_free_milli=(500,) + (1000,) * 7)
    state = ClusterState([shared], size_mix={0.5: 1, 1: 1})
    result = placed(state.place(Request("r", gpus_per_member=0, gpu_milli=500), "fgd"))
    assert result.assignments[0].gpu_indices == (0,)
    assert result.assignments[0].gpu_milli == 500


def test_a_sixteen_gpu_gang_stays_on_one_leaf_switch_when_it_can() -> None:
    nodes = [dgx("a0", free=8, leaf="A"), dgx("b0", free=8, leaf="B"), dgx("b1", free=8, leaf="B"),
             dgx("a1", free=4, leaf="A")]
    result = placed(place(nodes, Request("gang", members=2, gpus_per_member=8), "first-fit"))
    assert set(result.nodes) == {"b0", "b1"}
    assert result.topology is TopologyLevel.LEAF_SWITCH


def test_a_gang_that_fits_one_node_is_packed_into_its_nvlink_domain() -> None:
    nodes = [dgx("a", free=4), dgx("b", free=8)]
    result = placed(place(nodes, Request("gang", members=4, gpus_per_member=2)))
    assert result.nodes == ("b",)
    assert result.topology is TopologyLevel.NVLINK_DOMAIN


def test_hard_topology_rejects_with_the_topology_reason() -> None:
    nodes = [dgx("a0", leaf="A"), dgx("b0", leaf="B")]
    request = Request("gang", members=2, gpus_per_member=8, topology=TopologyLevel.LEAF_SWITCH,
                      topology_required=True)
    rejection = rejected(place(nodes, request))
    assert rejection.constraint == "topology"
    assert rejection.free_gpus == 16


def test_soft_topology_falls_back_to_the_fewest_switches() -> None:
    nodes = [dgx("a0", leaf="A", spine="X"), dgx("b0", leaf="B", spine="Y")]
    request = Request("gang", members=2, gpus_per_member=8, topology=TopologyLevel.LEAF_SWITCH)
    result = placed(place(nodes, request))
    assert result.topology is TopologyLevel.ANY
    assert set(result.nodes) == {"a0", "b0"}


def test_a_gang_spanning_switches_uses_the_fewest_leaves() -> None:
    nodes = [dgx(f"big{i}", leaf="big", spine=f"s{i}") for i in range(3)]
    nodes += [dgx(f"small{i}", leaf=f"small{i}", spine=f"t{i}") for i in range(3)]
    result = placed(place(nodes, Request("gang", members=4, gpus_per_member=8), "best-fit"))
    assert sum(1 for node in result.nodes if node.startswith("big")) == 3
    assert len(result.nodes) == 4


def test_a_gang_too_big_for_the_fleet_is_rejected_whole() -> None:
    nodes = [dgx("a"), dgx("b", free=4)]
    rejection = rejected(place(nodes, Request("gang", members=3, gpus_per_member=8)))
    assert rejection.constraint == "capacity"
    assert rejection.free_gpus == 12
    assert rejection.unusable_free_gpus == 4


def test_the_gpu_model_filter_is_honoured_and_explained() -> None:
    nodes = [dgx("a100", model="A100"), dgx("h100", model="H100", free=1)]
    request = Request("r", gpus_per_member=2, gpu_models=frozenset({"H100"}))
    assert rejected(place(nodes, request)).constraint == "capacity"
    missing = Request("r", gpu_models=frozenset({"B200"}))
    assert rejected(place(nodes, missing)).constraint == "gpu_model"


def test_cpu_per_member_can_be_the_binding_constraint() -> None:
    nodes = [dgx("a", cpu=4000)]
    rejection = rejected(place(nodes, Request("r", members=2, gpus_per_member=1, cpu_milli=3000)))
    assert rejection.constraint == "cpu"


def test_memory_per_member_can_be_the_binding_constraint() -> None:
    nodes = [dgx("a", memory=100)]
    rejection = rejected(place(nodes, Request("r", gpus_per_member=1, memory_mib=200)))
    assert rejection.constraint == "memory"


def test_unschedulable_nodes_are_never_used() -> None:
    nodes = [dgx("drained", schedulable=False), dgx("busy", free=1)]
    for policy in POLICIES:
        assert rejected(place(nodes, Request("r", gpus_per_member=2), policy)).constraint == "capacity"


def test_commit_subtracts_and_release_restores() -> None:
    state = ClusterState([dgx("a", cpu=8000)])
    request = Request("r", gpus_per_member=3, cpu_milli=2000)
    placement = placed(state.place(request))
    state.commit(placement, request)
    assert state.gpu_free == 5
    assert state.node("a").cpu_milli_free == 6000
    state.release(placement, request)
    assert state.gpu_free == 8
    assert state.gpu_allocated_milli == 0


def test_committing_the_same_placement_twice_is_refused_without_side_effects() -> None:
    state = ClusterState([dgx("a")])
    request = Request("r", gpus_per_member=8)
    placement = placed(state.place(request))
    state.commit(placement, request)
    with pytest.raises(ValueError, match="needs"):
        state.commit(placement, request)
    assert state.gpu_free == 0
    state.release(placement, request)
    with pytest.raises(ValueError):
        state.release(placement, request)


def test_an_unknown_policy_is_an_error() -> None:
    with pytest.raises(ValueError, match="policy"):
        place([dgx("a")], Request("r"), "worst-fit")


def test_a_malformed_request_is_rejected_as_invalid() -> None:
    rejection = rejected(place([dgx("a")], Request("r", gpus_per_member=1, gpu_milli=500)))
    assert rejection.constraint == "invalid"


def test_random_placement_is_reproducible_for_a_seed() -> None:
    nodes = two_tier_fleet(leaves=4, nodes_per_leaf=4)
    request = Request("r", members=3, gpus_per_member=4)
    first = {place(nodes, request, "random", seed=seed) for seed in range(5)}
    again = {place(nodes, request, "random", seed=seed) for seed in range(5)}
    assert first == again
    assert len(first) > 1


def test_the_frozen_view_reports_current_free_gpus() -> None:
    state = ClusterState([dgx("a")])
    request = Request("r", gpus_per_member=0, gpu_milli=250)
    state.commit(placed(state.place(request)), request)
    (node,) = state.nodes()
    assert sorted(node.gpu_free_milli) == [750] + [1000] * 7
    assert node.gpu_free_whole == 7


def test_a_gang_fits_inside_one_multi_node_nvlink_domain_when_it_can() -> None:
    rack = [Node(f"r{i}", 4, "GB200", nvlink_domain="nvl72-a", leaf_switch="leaf-0") for i in range(4)]
    loose = [Node(f"x{i}", 4, "GB200", nvlink_domain=f"x{i}", leaf_switch="leaf-0") for i in range(4)]
    request = Request("gang", members=4, gpus_per_member=4, topology=TopologyLevel.NVLINK_DOMAIN,
                      topology_required=True)
    result = placed(place(loose + rack, request))
    assert result.topology is TopologyLevel.NVLINK_DOMAIN
    assert set(result.nodes) == {"r0", "r1", "r2", "r3"}


def test_observed_requests_steer_fgd() -> None:
    # Seeing only 4-GPU work, FGD keeps the 4-GPU hole intact and takes from the 6-GPU node; seeing
    # only 1-GPU work, every choice is equally harmless, so its tie-break (best fit) decides.
    nodes = [dgx("four", free=4), dgx("six", free=6)]
    learned = ClusterState(nodes)
    for i in range(10):
        learned.observe_request(Request(f"seen{i}", gpus_per_member=4))
    assert placed(learned.place(Request("r", gpus_per_member=2), "fgd")).nodes == ("six",)
    assert learned.size_mix == {4.0: 1.0}
    indifferent = ClusterState(nodes, size_mix={1: 1})
    assert placed(indifferent.place(Request("r", gpus_per_member=2), "fgd")).nodes == ("four",)


def test_a_fleet_that_cannot_fit_a_whole_gpu_request_rejects_quickly_with_counts() -> None:
    state = ClusterState([dgx("a", free=3), dgx("b", free=2)])
    rejection = rejected(state.place(Request("r", gpus_per_member=4)))
    assert rejection.constraint == "capacity"
    assert (rejection.free_gpus, rejection.unusable_free_gpus) == (5, 5)


def test_best_fit_puts_a_gpu_share_on_the_fullest_gpu_that_still_fits() -> None:
    roomy = Node("roomy", 2, gpu_free_milli=(700, 1000))
    tight = Node("tight", 2, gpu_free_milli=(1000, 350))
    too_small = Node("too-small", 2, gpu_free_milli=(200, 0))
    result = placed(place([roomy, tight, too_small], Request("r", gpus_per_member=0, gpu_milli=300)))
    assert (result.nodes, result.assignments[0].gpu_indices) == (("tight",), (1,))

