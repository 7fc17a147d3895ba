"""The k8s-* policies (the FGD artifact's kube-scheduler plugins), fgd-cpu and fgd-strand: filter, score, tie-break."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.kube_score import (
    FragmentModel,
    NodeView,
    TypicalPod,
    cpu_per_gpu,
    fgd_choice,
    stranding_growth,
    typical_pods,
)
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Rejection, Request

from .strategies import fleets, requests


def host(name: str, gpus: int = 8, *, free: tuple[int, ...] = (), cpu: int = 96_000, cpu_free: int | None = None,
         model: str = "G2") -> Node:
    return Node(name=name, gpu_total=gpus, gpu_model=model, gpu_free_milli=free, cpu_milli_total=cpu,
                cpu_milli_free=cpu if cpu_free is None else cpu_free, memory_mib_total=1 << 20,
                memory_mib_free=1 << 20)


def placed(result: Placement | Rejection) -> Placement:
    assert isinstance(result, Placement), result
    return result


ONE_GPU = TypicalPod(cpu_milli=8000, gpu_milli=1000, gpus=1, gpu_models=frozenset(), probability=1.0)


def test_typical_pods_are_the_most_frequent_specs_covering_the_popularity_threshold() -> None:
    requests = ([Request(f"a{i}", gpus_per_member=1, cpu_milli=4000) for i in range(6)]
                + [Request(f"b{i}", gpu_milli=500, cpu_milli=2000) for i in range(3)]
                + [Request("c", gpus_per_member=8, cpu_milli=64000)])
    pods = typical_pods(requests, popularity=0.85)
    assert [(p.gpu_milli, p.gpus) for p in pods] == [(1000, 1), (500, 1)]
    assert abs(sum(p.probability for p in pods) - 1.0) < 1e-9
    assert pods[0].probability == 6 / 9


def test_a_node_without_cpu_for_the_typical_pod_counts_all_its_free_gpus_as_fragmented() -> None:
    fragments = FragmentModel([ONE_GPU])
    assert fragments.fragment("G2", (1000, 1000, 0, 0), 96_000) == 0.0
    assert fragments.fragment("G2", (1000, 1000, 0, 0), 4_000) == 2000.0
    assert fragments.fragment("G2", (500, 1000, 0, 0), 96_000) == 500.0


def test_fgd_prefers_the_placement_that_grows_fragmentation_least() -> None:
    fragments = FragmentModel([ONE_GPU])
    spec = (8000, 1000, 1, frozenset[str]())
    # Taking the last CPU of a node strands its other free GPU; a node with CPU to spare does not.
    tight = fgd_choice(NodeView("G2", (1000, 1000), 10_000, 1e9), spec, fragments)[0]
    roomy = fgd_choice(NodeView("G2", (1000, 1000), 90_000, 1e9), spec, fragments)[0]
    assert roomy > tight
    state = ClusterState([host("tight", 2, cpu_free=10_000), host("roomy", 2)], typical_pods=[ONE_GPU])
    assert placed(state.place(Request("p", gpus_per_member=1, cpu_milli=8000), "k8s-fgd")).nodes == ("roomy",)


def test_k8s_best_fit_scores_cpu_and_gpu_together() -> None:
    # Same free GPUs; the node with less free CPU is the better fit.
    state = ClusterState([host("cpu-rich", cpu=128_000), host("cpu-poor", cpu=32_000)])
    decision = placed(state.place(Request("p", gpus_per_member=1, cpu_milli=4000), "k8s-best-fit"))
    assert decision.nodes == ("cpu-poor",)


def test_k8s_random_draws_nodes_at_random_but_reproducibly_for_a_seed() -> None:
    state = ClusterState([host(f"n{i}") for i in range(8)])
    request = Request("p", gpus_per_member=1, cpu_milli=4000)
    chosen = {placed(state.place(request, "k8s-random", seed=seed)).nodes for seed in range(20)}
    assert len(chosen) > 1
    assert state.place(request, "k8s-random", seed=3) == state.place(request, "k8s-random", seed=3)


def test_k8s_best_fit_and_fgd_break_ties_by_the_smallest_node_name_as_the_artifacts_select_host() -> None:
    # Listed out of name order: the tie goes to "n0" whatever the seed, not to the first listed node.
    state = ClusterState([host(f"n{i}") for i in (5, 3, 0, 7)], typical_pods=[ONE_GPU])
    request = Request("p", gpus_per_member=1, cpu_milli=4000)
    for policy in ("k8s-best-fit", "k8s-fgd"):
        assert {placed(state.place(request, policy, seed=seed)).nodes for seed in range(10)} == {("n0",)}


def test_fgd_cpu_breaks_ties_by_best_fit_then_node_order() -> None:
    state = ClusterState([host("a", cpu=128_000), host("b", cpu=64_000), host("c", cpu=64_000)],
                         typical_pods=[ONE_GPU])
    request = Request("p", gpus_per_member=1, cpu_milli=4000)
    assert {placed(state.place(request, "fgd-cpu", seed=seed)).nodes for seed in range(10)} == {("b",)}


def test_a_share_goes_to_the_gpu_fgd_scores_best_and_on_a_tie_to_the_first_gpu_or_the_fullest() -> None:
    share = TypicalPod(cpu_milli=0, gpu_milli=500, gpus=1, gpu_models=frozenset(), probability=0.5)
    whole = TypicalPod(cpu_milli=0, gpu_milli=1000, gpus=1, gpu_models=frozenset(), probability=0.5)
    pod = Request("p", gpus_per_member=0, gpu_milli=500)
    # Keeping GPU 0 whole leaves room for the whole-GPU typical pod: FGD prefers the partly used GPU 1.
    state = ClusterState([host("n", 2, free=(1000, 500))], typical_pods=[share, whole])
    assert placed(state.place(pod, "k8s-fgd")).assignments[0].gpu_indices == (1,)
    # Against the share alone both GPUs score the same: the artifact takes the first, fgd-cpu the fullest.
    state = ClusterState([host("n", 2, free=(1000, 500))], typical_pods=[share])
    assert placed(state.place(pod, "k8s-fgd")).assignments[0].gpu_indices == (0,)
    assert placed(state.place(pod, "fgd-cpu")).assignments[0].gpu_indices == (1,)


def test_cpu_only_pods_are_placed_by_the_kube_policies_and_rejected_when_no_cpu_is_left() -> None:
    state = ClusterState([host("small", cpu=8000), host("big", cpu=64_000)])
    pod = Request("cpu", gpus_per_member=0, cpu_milli=16_000, memory_mib=1024)
    decision = placed(state.place(pod, "k8s-random"))
    assert decision.nodes == ("big",) and decision.assignments[0].gpu_indices == ()
    state.commit(decision, pod)
    assert state.node("big").cpu_milli_free == 48_000
    rejection = state.place(Request("huge", gpus_per_member=0, cpu_milli=100_000), "k8s-fgd")
    assert isinstance(rejection, Rejection) and rejection.constraint == "cpu"
    # the engine's own policies still refuse CPU-only requests
    assert isinstance(state.place(Request("cpu2", gpus_per_member=0, cpu_milli=1000), "best-fit"), Rejection)


def test_gangs_use_the_engine_policy_the_kube_policy_stands_for() -> None:
    nodes = [host(f"n{i}") for i in range(3)]
    gang = Request("g", members=2, gpus_per_member=8)
    assert ClusterState(nodes).place(gang, "k8s-best-fit") == ClusterState(nodes).place(gang, "best-fit")


def test_the_typical_cpu_per_gpu_weights_each_gpu_pod_by_probability_and_gpus_used() -> None:
    pods = [TypicalPod(8000, 1000, 1, frozenset(), 0.5), TypicalPod(2000, 500, 1, frozenset(), 0.25),
            TypicalPod(32_000, 0, 0, frozenset(), 0.25)]  # CPU-only pods use no GPU: left out
    assert cpu_per_gpu(pods) == round((0.5 * 8000 + 0.25 * 2000) / (0.5 + 0.25 * 0.5)) == 7200
    assert cpu_per_gpu([TypicalPod(0, 1000, 1, frozenset(), 1.0)]) == 0


def test_stranded_gpus_are_those_the_free_cpu_cannot_feed_at_the_typical_ratio() -> None:
    spec = (12_000, MILLI_PER_GPU, 1, frozenset[str]())
    # 4 free GPUs, 16 cores at 8 per GPU: 2 stranded before; after the pod 3 GPUs, 4 cores: 2.5 stranded.
    assert stranding_growth(NodeView("G2", (1000,) * 4, 16_000, 1e9), spec, 8000) == 500.0
    assert stranding_growth(NodeView("G2", (1000,) * 4, math.inf, 1e9), spec, 8000) == 0.0  # CPU untracked
    assert stranding_growth(NodeView("G2", (1000,) * 4, 16_000, 1e9), spec, 0) == 0.0  # no CPU demand known
    # A pod above the ratio strands more on a CPU-poor node and nothing on a CPU-rich one ...
    assert stranding_growth(NodeView("G2", (1000,) * 4, 24_000, 1e9), spec, 8000) == 500.0
    assert stranding_growth(NodeView("G2", (1000,) * 4, 64_000, 1e9), spec, 8000) == 0.0
    # ... and a CPU-light share reduces what a CPU-poor node strands.
    share = (2000, 500, 1, frozenset[str]())
    assert stranding_growth(NodeView("G2", (1000,) * 4, 24_000, 1e9), share, 8000) == -250.0


def test_fgd_strand_sends_a_cpu_heavy_pod_where_it_strands_no_gpu_when_fgd_ties() -> None:
    # FGD cannot tell the nodes apart (the typical pod still fits on both afterwards); best fit takes the
    # CPU-poor one, where 12 cores for one GPU leave 1.5 of its 3 other GPUs without CPU at 8 cores each.
    nodes = [host("poor", 4, cpu=24_000), host("rich", 4, cpu=64_000)]
    pod = Request("p", gpus_per_member=1, cpu_milli=12_000)
    assert placed(ClusterState(nodes, typical_pods=[ONE_GPU]).place(pod, "fgd-cpu")).nodes == ("poor",)
    assert placed(ClusterState(nodes, typical_pods=[ONE_GPU]).place(pod, "fgd-strand")).nodes == ("rich",)


def test_fgd_strand_puts_a_cpu_only_pod_on_the_node_whose_free_gpus_it_does_not_starve() -> None:
    # "gpus" has 4 free GPUs and CPU for 3 of them; "cpu" has no free GPU but much CPU. Both keep the
    # typical pod feasible (same FGD score); best fit prefers "gpus", which would then feed only 2 GPUs.
    nodes = [host("gpus", 4, cpu=24_000), host("cpu", 4, free=(0, 0, 0, 0), cpu=120_000)]
    pod = Request("c", gpus_per_member=0, cpu_milli=8000)
    assert placed(ClusterState(nodes, typical_pods=[ONE_GPU]).place(pod, "fgd-cpu")).nodes == ("gpus",)
    assert placed(ClusterState(nodes, typical_pods=[ONE_GPU]).place(pod, "fgd-strand")).nodes == ("cpu",)


def test_without_cpu_in_the_typical_pods_fgd_strand_decides_as_fgd_cpu() -> None:
    nodes = [host("poor", 4, cpu=24_000), host("rich", 4, cpu=64_000)]
    pod = Request("p", gpus_per_member=1, cpu_milli=12_000)
    blind = [TypicalPod(0, 1000, 1, frozenset(), 1.0)]
    strand = placed(ClusterState(nodes, typical_pods=blind).place(pod, "fgd-strand"))
    assert strand.nodes == placed(ClusterState(nodes, typical_pods=blind).place(pod, "fgd-cpu")).nodes


CPU_TYPICAL = [TypicalPod(4000, 1000, 1, frozenset(), 0.5), TypicalPod(2000, 500, 1, frozenset(), 0.3),
               TypicalPod(8000, 0, 0, frozenset(), 0.2)]


@settings(max_examples=100, deadline=None)
@given(fleets(), st.lists(requests(), max_size=12), st.sampled_from(["fgd-cpu", "fgd-strand"]))
def test_fgd_strand_with_cpu_hungry_typical_pods_never_over_allocates(
    nodes: list[Node], batch: list[Request], policy: str
) -> None:
    # The engine-wide invariants run without typical pods (so the stranding term is 0): here it is not.
    state = ClusterState(nodes, typical_pods=CPU_TYPICAL)
    for i, request in enumerate(batch):
        request = replace(request, id=f"r{i}", members=1)
        result = state.place(request, policy, seed=i)
        if isinstance(result, Placement):
            state.commit(result, request)
        for node in state.nodes():
            assert all(0 <= milli <= MILLI_PER_GPU for milli in node.free_milli())
            assert node.cpu_milli_free >= 0
