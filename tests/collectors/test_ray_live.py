"""Against a real Ray cluster started by scripts/ray/start.sh (head + 2 workers, 8 GPUs each) running
scripts/ray/workload.py. Nothing is mocked: figures are compared with what `ray status` says."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from scheduling.collectors import RayActuator, RayCollector
from scheduling.collectors.snapshot import WorkloadState
from scheduling.models import Orchestrator, Workload
from scheduling.selectors.workloads import active_workloads
from scheduling.services.ingest import ingest_snapshot

from .conftest import wait_for

pytestmark = pytest.mark.live


@pytest.fixture
def collector(ray_cluster):
    return RayCollector(ray_cluster.url)


def _settled(collector):
    """The autoscaler report lags a few seconds behind the scheduler: wait for the full picture."""
    snapshots = []

    def ready():
        snapshots.append(collector.collect())
        return snapshots[-1].gpu_allocated == 24 and snapshots[-1].pending_gpus == 44

    try:
        wait_for(ready, timeout=60, what="Ray to report 24 GPUs used and 44 pending")
    except TimeoutError as error:
        last = snapshots[-1]
        shapes = [(w.external_id, w.state, w.gang_size, w.gpus_per_member) for w in last.workloads]
        seen = f"last seen {last.gpu_allocated} used, {last.pending_gpus} pending, workloads {shapes}"
        raise TimeoutError(f"{error}; {seen}") from error
    return snapshots[-1]


def test_the_cluster_has_three_live_nodes(ray_cluster, collector, record_property):
    record_property("ray_start_seconds", round(ray_cluster.start_seconds, 1))  # reported, never asserted
    assert [n.state for n in collector.collect().nodes] == ["alive"] * 3


def test_gpus_per_node_and_pending_demand_equal_ray_status(ray_cluster, ray_workload, collector):
    snapshot = _settled(collector)
    assert {n.name: (n.gpu_total, n.gpu_allocated) for n in snapshot.nodes} == {
        "ray-head": (8, 8),
        "ray-worker-1": (8, 8),
        "ray-worker-2": (8, 8),
    }
    status = ray_cluster.cli("status", "--address", ray_cluster.env["RAY_ADDRESS"])
    used, total, group_used, reserved = map(
        float, re.search(r"([\d.]+)/([\d.]+) GPU \(([\d.]+) used of ([\d.]+) reserved", status).groups()
    )
    assert snapshot.gpu_total == total and snapshot.gpu_allocated == used - group_used + reserved
    demands = re.findall(r"\{([^}]*)\}(?: \* (\d+))?[^:]*: (\d+)\+ pending", status)
    pending = 0.0
    for shape, bundles, count in demands:
        gpu = re.search(r"'GPU': ([\d.]+)", shape)
        pending += float(gpu.group(1) if gpu else 0) * int(bundles or 1) * int(count)
    assert snapshot.pending_gpus == pending == 44


def test_the_gang_the_actor_and_the_waiting_work_are_seen_with_their_team(ray_workload, collector):
    snapshot = _settled(collector)
    by_name: dict[str, list] = {}
    for workload in snapshot.workloads:
        by_name.setdefault(workload.name, []).append(workload)
    (gang,) = by_name["pg-train"]
    assert (gang.state, gang.gang_size, gang.gpus_per_member, len(set(gang.nodes))) == (
        WorkloadState.RUNNING,
        2,
        8.0,
        2,
    )
    (blocked,) = by_name["pg-big"]
    assert blocked.state is WorkloadState.PENDING and blocked.gpus == 16
    (actor,) = by_name["gpu-actor"]
    assert actor.state is WorkloadState.RUNNING and actor.gpus == 4
    assert sorted(w.gpus for w in by_name["too_big"] + by_name["wait_four"]) == [4, 4, 4, 16]
    assert {(w.team, w.user) for w in snapshot.workloads} == {("llm", "alice")}


@pytest.mark.django_db
def test_the_submitter_in_the_jobs_metadata_makes_its_work_that_portal_users(ray_cluster, ray_workload, collector):
    alice = get_user_model().objects.create_user("alice")
    ray = Orchestrator.objects.create(name="ray-live", kind="ray", endpoint=ray_cluster.url)
    snapshot = _settled(collector)
    ingest_snapshot(ray, snapshot)
    mine = active_workloads(alice)
    assert mine.count() == Workload.objects.filter(orchestrator=ray).count() > 0
    assert {(w.cluster_user, w.team_id) for w in mine} == {("alice", None)}  # no portal team llm here


def test_a_cluster_started_by_hand_can_only_be_observed(ray_cluster):
    result = RayActuator(None, dry_run=False).set_bounds("gpu_worker", 0, 2)
    assert not result.changed and "observe only" in result.message
