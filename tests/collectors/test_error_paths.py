"""Failure paths of the HTTP collectors and actuators.

These tests stub HTTP with respx (timeouts, a 500, truncated JSON, a 405): the only mocks in the
collector suite, used because a live daemon cannot be made to fail on cue. Sleeps are recorded, not
slept, so retries cost no time.
"""

from __future__ import annotations

import httpx
import pytest
import respx

from scheduling.collectors import (
    BreakerState,
    CircuitBreaker,
    CircuitOpen,
    MalformedResponse,
    RayCollector,
    RetryPolicy,
    SlurmActuator,
    SlurmCollector,
    SourceUnavailable,
)

from .conftest import load_fixture

SLURM = "http://slurm.test"
RAY = "http://ray.test"
POLICY = RetryPolicy(attempts=3, base_delay_s=0.5, jitter=0.5, seed=7)


def _slurm(sleeps: list[float], **kwargs) -> SlurmCollector:
    return SlurmCollector(SLURM, "jwt", "portal", retry=POLICY, sleep=sleeps.append, **kwargs)


def _route_all_slurm(mock: respx.MockRouter) -> None:
    for what in ("nodes", "jobs", "partitions"):
        mock.get(f"{SLURM}/slurm/v0.0.38/{what}").respond(json=load_fixture("slurm", f"v0.0.38_{what}.json"))


def test_a_timeout_is_retried_with_seeded_backoff_then_reported_as_unavailable():
    sleeps: list[float] = []
    with respx.mock:
        route = respx.get(f"{SLURM}/slurm/v0.0.38/nodes").mock(side_effect=httpx.ReadTimeout("slow"))
        with pytest.raises(SourceUnavailable, match="timed out"):
            _slurm(sleeps).collect()
    assert route.call_count == 3
    assert sleeps == list(POLICY.delays())
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


def test_a_500_then_success_gives_a_whole_snapshot():
    sleeps: list[float] = []
    with respx.mock as mock:
        _route_all_slurm(mock)
        nodes = load_fixture("slurm", "v0.0.38_nodes.json")
        mock.routes[0].side_effect = [httpx.Response(500, text="slurmctld busy"), httpx.Response(200, json=nodes)]
        snapshot = _slurm(sleeps).collect()
    assert len(sleeps) == 1 and snapshot.gpu_total == 64 and len(snapshot.workloads) == 6


def test_truncated_json_is_malformed_and_not_retried():
    sleeps: list[float] = []
    body = '{"meta": {}, "errors": [], "nodes": [{"name": "dg'  # cut mid-document
    with respx.mock:
        route = respx.get(f"{SLURM}/slurm/v0.0.38/nodes").respond(200, text=body)
        with pytest.raises(MalformedResponse, match="not whole JSON"):
            _slurm(sleeps).collect()
    assert route.call_count == 1 and sleeps == []


def test_a_failure_on_the_last_document_yields_no_snapshot_at_all():
    with respx.mock as mock:
        _route_all_slurm(mock)
        mock.get(f"{SLURM}/slurm/v0.0.38/partitions").respond(503)
        with pytest.raises(SourceUnavailable, match="503"):
            _slurm([]).collect()


def test_a_405_on_a_rest_node_update_is_reported_not_retried():
    node = load_fixture("slurm", "v0.0.38_node_dgx01.json")
    with respx.mock:
        respx.get(f"{SLURM}/slurm/v0.0.39/node/dgx01").respond(json=node)
        update = respx.post(f"{SLURM}/slurm/v0.0.39/node/dgx01").respond(
            405, text="Requested REST method is not defined at URL."
        )
        actuator = SlurmActuator(SLURM, "jwt", "portal", api_version="v0.0.39", dry_run=False)
        with pytest.raises(SourceUnavailable) as error:
            actuator.drain("dgx01", "maintenance")
    assert update.call_count == 1 and error.value.status == 405 and not error.value.retryable


def test_the_breaker_opens_after_failed_rounds_and_half_opens_after_the_reset_time():
    now = [1000.0]
    state = BreakerState()
    breaker = CircuitBreaker(state, failure_threshold=2, reset_after_s=60, clock=lambda: now[0])
    collector = SlurmCollector(SLURM, "jwt", "portal", retry=RetryPolicy(attempts=1), breaker=breaker)
    with respx.mock as mock:
        _route_all_slurm(mock)
        mock.routes[0].side_effect = httpx.ConnectError("refused")
        for _ in range(2):
            with pytest.raises(SourceUnavailable):
                collector.collect()
        assert breaker.status == "open" and state.opened_at == 1000.0
        calls = mock.routes[0].call_count
        with pytest.raises(CircuitOpen):
            collector.collect()
        assert mock.routes[0].call_count == calls  # refused without touching the orchestrator
        now[0] += 61
        assert breaker.status == "half_open"
        mock.routes[0].side_effect = None
        assert collector.collect().gpu_total == 64
    assert breaker.status == "closed" and state.consecutive_failures == 0


def test_a_ray_cluster_status_500_and_a_truncated_listing_fail_the_round():
    with respx.mock as mock:
        mock.get(f"{RAY}/api/v0/nodes").respond(json=load_fixture("ray", "api_v0_nodes_detail_true.json"))
        mock.get(f"{RAY}/api/cluster_status").respond(500, text="GCS down")
        with pytest.raises(SourceUnavailable, match="500"):
            RayCollector(RAY, retry=RetryPolicy(attempts=1)).collect()
    with respx.mock as mock:
        mock.get(f"{RAY}/api/v0/nodes").respond(200, text='{"result": true, "data": {"result": {"resu')
        with pytest.raises(MalformedResponse):
            RayCollector(RAY).collect()


def test_ray_listings_ask_for_everything_but_finished_work():
    with respx.mock as mock:
        nodes = mock.get(f"{RAY}/api/v0/nodes").respond(json=load_fixture("ray", "api_v0_nodes_detail_true.json"))
        mock.get(f"{RAY}/api/cluster_status").respond(json=load_fixture("ray", "api_cluster_status.json"))
        mock.get(f"{RAY}/api/jobs/").respond(json=load_fixture("ray", "api_jobs.json"))
        pgs = mock.get(f"{RAY}/api/v0/placement_groups").respond(
            json=load_fixture("ray", "api_v0_placement_groups_detail_true.json")
        )
        tasks = mock.get(f"{RAY}/api/v0/tasks").respond(
            json=load_fixture("ray", "api_v0_tasks_detail_true_limit_100.json")
        )
        mock.get(f"{RAY}/api/v0/actors").respond(json=load_fixture("ray", "api_v0_actors_detail_true.json"))
        snapshot = RayCollector(RAY, limit=500).collect()
    assert snapshot.pending_gpus == 44 and snapshot.gpu_allocated == 24
    assert nodes.calls.last.request.url.params["limit"] == "500"
    assert pgs.calls.last.request.url.params.get_list("filter_values") == ["REMOVED"]
    assert tasks.calls.last.request.url.params.get_list("filter_values") == ["FINISHED", "FAILED"]
    assert tasks.calls.last.request.url.params.get_list("filter_predicates") == ["!=", "!="]


def test_a_ray_report_lagging_behind_a_new_node_is_asked_again_then_reported_unavailable():
    status = load_fixture("ray", "api_cluster_status.json")
    report = status["data"]["clusterStatus"]["loadMetricsReport"]
    lagging = {k: v for k, v in report["usageByNode"].items() if not k.startswith("886")}
    report["usageByNode"] = lagging
    sleeps: list[float] = []
    with respx.mock as mock:
        mock.get(f"{RAY}/api/v0/nodes").respond(json=load_fixture("ray", "api_v0_nodes_detail_true.json"))
        route = mock.get(f"{RAY}/api/cluster_status").respond(json=status)
        with pytest.raises(SourceUnavailable, match="no usage yet"):
            RayCollector(RAY, retry=POLICY, sleep=sleeps.append).collect()
    assert route.call_count == 3 and sleeps == list(POLICY.delays())
