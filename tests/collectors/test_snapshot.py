"""Snapshot types turn into the engine's types without losing GPUs."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduling.collectors import ObservedNode, ObservedWorkload, Snapshot, TeamMapping, WorkloadState
from scheduling.engine.types import OrchestratorKind


def test_an_observed_node_marks_its_busy_gpus_for_the_engine():
    node = ObservedNode("dgx01", "slurm-a", gpu_total=8, gpu_allocated=3, gpu_allocated_indices=(0, 4, 7))
    engine = node.to_node()
    assert engine.gpu_free_milli == (0, 1000, 1000, 1000, 0, 1000, 1000, 0)
    assert engine.gpu_free_whole == 5 and engine.orchestrator == "slurm-a"
    assert not ObservedNode("dgx02", "k", gpu_total=8, cordoned=True).to_node().schedulable


def test_a_fractional_ray_demand_becomes_a_milli_gpu_request():
    task = ObservedWorkload("task:1", "ray-a", "llm", WorkloadState.PENDING, gpus_per_member=0.5, instances=3)
    request = task.to_request()
    assert (request.members, request.gpus_per_member, request.gpu_milli, request.gpus) == (3, 0, 500, 1.5)


def test_snapshot_splits_pending_requests_from_running_work():
    gang = ObservedWorkload("1", "s", "llm", WorkloadState.RUNNING, gang_size=2, gpus_per_member=8, started_at=5.0)
    held = ObservedWorkload("2", "s", "llm", WorkloadState.HELD, gpus_per_member=1)
    waiting = ObservedWorkload("3", "s", "cv", WorkloadState.PENDING, gang_size=4, gpus_per_member=8)
    snapshot = Snapshot("s", OrchestratorKind.SLURM, datetime.now(UTC), (), (gang, held, waiting))
    (running,) = snapshot.running_workloads()
    assert (running.gpus, running.gang_id, running.started_at) == (16.0, "1", 5.0)
    assert [r.id for r in snapshot.pending_requests()] == ["s:3"]


def test_unmapped_identities_fall_back_to_the_default_team():
    teams = TeamMapping(default_team="unassigned")
    assert teams.slurm_team("", "") == "unassigned"
    assert teams.k8s_team("", {}) == "unassigned"
    assert teams.ray_team(None, "python run.py") == "unassigned"
