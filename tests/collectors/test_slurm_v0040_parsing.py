"""slurmrestd v0.0.40-v0.0.42 (Slurm 24.11) answers, recorded from scripts/slurm/start-trixie.sh's fleet:
states are lists and numbers are {set, infinite, number}; the collector must read them as it reads 22.05's."""

from __future__ import annotations

import copy

import pytest

from scheduling.collectors.errors import MalformedResponse
from scheduling.collectors.slurm import build_snapshot, parse_job, parse_topology
from scheduling.collectors.slurm_wire import job_state, node_v38, number, partition_v38
from scheduling.collectors.snapshot import DEFAULT_TEAMS, WorkloadState

from .conftest import FIXTURES, load_fixture

NEW_VERSIONS = ["v0.0.40", "v0.0.41", "v0.0.42"]


def snapshot(version: str):
    topology = parse_topology((FIXTURES / "slurm" / "topology.conf").read_text())
    docs = [load_fixture("slurm", f"{version}_{what}.json") for what in ("nodes", "jobs", "partitions")]
    return build_snapshot("slurm", *docs, topology=topology)


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_jobs_with_state_lists_and_number_structs_are_read_as_running_and_pending_work(version):
    jobs = {w.external_id: w for w in snapshot(version).workloads}
    assert sorted(jobs) == ["2", "3", "4", "5_0", "5_1", "5_2", "5_3"]
    gang = jobs["3"]
    assert gang.state is WorkloadState.RUNNING and gang.gang_size == 2 and gang.gpus == 16
    assert gang.nodes == ("dgx06", "dgx07") and gang.node_gpu_indices == (tuple(range(8)), tuple(range(8)))
    assert gang.submitted_at == 1796338106.0 and gang.team == "llm"
    assert jobs["4"].state is WorkloadState.PENDING and jobs["4"].pending_reason == "Resources"
    assert jobs["4"].gpus == 64
    assert jobs["5_2"].array_id == "5" and jobs["5_2"].node_gpu_indices == ((0, 1),)


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_a_drained_node_given_as_a_state_list_is_unschedulable_and_keeps_its_reason(version):
    nodes = {n.name: n for n in snapshot(version).nodes}
    assert nodes["dgx08"].state == "drained" and not nodes["dgx08"].schedulable
    assert nodes["dgx08"].reason == "gpu xid 79" and nodes["dgx08"].cordoned
    assert nodes["dgx06"].state == "mixed" and nodes["dgx06"].gpu_allocated == 8
    assert nodes["dgx02"].schedulable and nodes["dgx02"].leaf_switch == "leaf1"


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_nested_partitions_give_their_nodes_state_and_priority_tier(version):
    queues = {q.name: q for q in snapshot(version).queues}
    assert (queues["gpu"].state, queues["gpu"].priority_tier, queues["gpu"].gpu_total) == ("UP", 1, 64)
    assert queues["debug"].nodes == ("dgx01", "dgx02") and queues["debug"].priority_tier == 10


def test_every_api_version_sees_the_same_allocation_on_the_same_fleet():
    totals = {v: sum(n.gpu_allocated for n in snapshot(v).nodes) for v in NEW_VERSIONS}
    assert set(totals.values()) == {27}  # 3 + 16 + 4 x 2


def test_an_unset_or_infinite_number_reads_as_no_value():
    assert number({"set": True, "infinite": False, "number": 7}) == 7
    assert number({"set": False, "infinite": False, "number": 0}) is None
    assert number({"set": True, "infinite": True, "number": 0}) is None
    assert number(5) == 5 and number("x") == "x"


def test_a_completing_job_still_counts_as_running_because_it_holds_its_gpus():
    raw = copy.deepcopy(next(j for j in load_fixture("slurm", "v0.0.42_jobs.json")["jobs"] if j["job_id"] == 2))
    raw["job_state"] = ["COMPLETED", "COMPLETING"]
    assert job_state(raw["job_state"]) == "COMPLETING"
    workload = parse_job(raw, orchestrator="slurm", teams=DEFAULT_TEAMS)
    assert workload is not None and workload.state is WorkloadState.RUNNING and workload.gpus == 3


def test_a_finished_job_in_a_state_list_is_no_longer_demand():
    raw = copy.deepcopy(next(j for j in load_fixture("slurm", "v0.0.42_jobs.json")["jobs"] if j["job_id"] == 2))
    raw["job_state"] = ["CANCELLED"]
    assert parse_job(raw, orchestrator="slurm", teams=DEFAULT_TEAMS) is None


def test_a_node_state_list_splits_into_base_state_and_flags():
    assert node_v38({"state": ["DOWN", "NOT_RESPONDING"]})["state_flags"] == ["NOT_RESPONDING"]
    assert node_v38({"state": ["MIXED", "DRAIN"]})["state"] == "mixed"
    assert node_v38({"state": "idle"}) == {"state": "idle"}  # v0.0.38 objects pass through unchanged


def test_a_v0038_partition_passes_through_unchanged():
    raw = {"name": "gpu", "nodes": "dgx[01-02]", "state": "UP", "priority_tier": 1}
    assert partition_v38(raw) == raw


def test_a_node_without_a_state_is_still_refused_as_malformed():
    raw = copy.deepcopy(load_fixture("slurm", "v0.0.42_nodes.json")["nodes"][0])
    del raw["state"]
    with pytest.raises(MalformedResponse):
        build_snapshot("slurm", {"nodes": [raw]}, {"jobs": []}, {"partitions": []})
