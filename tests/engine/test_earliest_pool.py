"""earliest_pool: among alike pools (two Kubernetes node pools), the one where the workload starts first."""

from __future__ import annotations

from scheduling.engine.routing import earliest_pool
from scheduling.engine.types import Request

from .test_route_by_start import NOW, free_pool, full_pool

POD = Request("pod", gpus_per_member=8, team="nlp")


def test_the_pod_goes_to_the_free_pool_and_the_reasons_name_both_waits() -> None:
    decision = earliest_pool(POD, [full_pool("k8s-a", end=7_200), free_pool("k8s-b")], now=NOW)
    assert (decision.orchestrator, decision.rule) == ("k8s-b", "predicted-start")
    assert decision.reasons[0].startswith("k8s-b: starts now")
    assert decision.reasons[1].startswith("k8s-a: starts in ~2.0 h")
    assert decision.reasons[-1] == "k8s-b: predicted to start first"


def test_a_tie_goes_to_the_first_pool_given() -> None:
    assert earliest_pool(POD, [free_pool("k8s-b"), free_pool("k8s-a")], now=NOW).orchestrator == "k8s-b"


def test_a_team_at_its_cap_in_one_pool_goes_to_the_other() -> None:
    capped = free_pool("k8s-a")
    capped = type(capped)(capped.orchestrator, capped.nodes, team_in_use={"nlp": 8.0}, team_cap={"nlp": 8.0})
    decision = earliest_pool(POD, [capped, full_pool("k8s-b", end=600)], now=NOW)
    assert decision.orchestrator == "k8s-b"
    assert any(reason.startswith("k8s-a: start unknown") for reason in decision.reasons)


def test_with_no_predictable_start_the_default_pool_stands() -> None:
    decision = earliest_pool(POD, [full_pool("k8s-a", end=None), full_pool("k8s-b", end=None)], now=NOW)
    assert (decision.orchestrator, decision.rule) == ("k8s-a", "default")
    assert "no pool has a predictable start" in decision.reasons[-1]


def test_no_pool_is_no_choice() -> None:
    assert earliest_pool(POD, [], now=NOW).orchestrator == ""
