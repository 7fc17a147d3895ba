from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.routing import route
from scheduling.engine.types import Request, WorkloadKind

ALL = {"slurm", "kubernetes", "ray"}


def test_an_explicit_orchestrator_wins() -> None:
    decision = route(Request("r", members=64, orchestrator="ray"), available=ALL)
    assert decision.orchestrator == "ray"
    assert decision.rule == "explicit"


def test_an_unavailable_explicit_choice_falls_back_to_the_rules_and_says_so() -> None:
    decision = route(Request("r", members=4, gpus_per_member=8, orchestrator="slurm"), available={"kubernetes"})
    assert decision.orchestrator == "kubernetes"
    assert any("not available" in reason for reason in decision.reasons)


def test_a_multi_node_gang_goes_to_slurm() -> None:
    decision = route(Request("r", members=4, gpus_per_member=8, kind=WorkloadKind.TRAINING), available=ALL)
    assert decision.orchestrator == "slurm"
    assert decision.rule == "multi-node"


def test_a_multi_node_gang_goes_to_volcano_when_slurm_is_missing() -> None:
    decision = route(Request("r", members=4, gpus_per_member=8), available={"kubernetes", "ray"})
    assert decision.orchestrator == "kubernetes"
    assert any("falling back" in reason for reason in decision.reasons)


def test_a_long_single_node_run_goes_to_slurm() -> None:
    decision = route(Request("r", gpus_per_member=8, duration_estimate_s=12 * 3600), available=ALL)
    assert decision.orchestrator == "slurm"
    assert decision.rule == "long-run"


def test_hyperparameter_trials_go_to_ray() -> None:
    decision = route(Request("r", kind=WorkloadKind.HPO, duration_estimate_s=600), available=ALL)
    assert decision.orchestrator == "ray"


def test_a_short_single_gpu_task_goes_to_ray() -> None:
    assert route(Request("r", duration_estimate_s=300), available=ALL).rule == "short-task"


def test_inference_goes_to_kubernetes_even_though_it_runs_for_ever() -> None:
    decision = route(Request("r", kind=WorkloadKind.INFERENCE, duration_estimate_s=30 * 86400), available=ALL)
    assert decision.orchestrator == "kubernetes"


def test_a_latency_sla_means_kubernetes() -> None:
    decision = route(Request("r", latency_sla_ms=50.0), available=ALL)
    assert decision.orchestrator == "kubernetes"
    assert "50 ms" in decision.reasons[0]


def test_nothing_available_routes_nowhere_with_a_reason() -> None:
    decision = route(Request("r"), available=set())
    assert decision.orchestrator == ""
    assert decision.reasons


@settings(max_examples=150, deadline=None)
@given(st.builds(Request, id=st.just("r"), members=st.integers(1, 64), gpus_per_member=st.sampled_from((1, 2, 8)),
                 kind=st.sampled_from(list(WorkloadKind)), duration_estimate_s=st.sampled_from((0.0, 600.0, 86400.0)),
                 orchestrator=st.sampled_from(("", "slurm", "ray", "kubernetes")),
                 latency_sla_ms=st.sampled_from((None, 20.0))),
       st.sets(st.sampled_from(sorted(ALL)), min_size=1))
def test_every_route_lands_on_an_available_orchestrator_with_reasons(workload: Request, available: set[str]) -> None:
    decision = route(workload, available=available)
    assert decision.orchestrator in available
    assert decision.reasons
    assert decision == route(workload, available=available)
    if workload.orchestrator in available:
        assert decision.orchestrator == workload.orchestrator
