"""Slurm parsers against recorded slurmrestd 22.05 answers (fixtures/ always, shared samples when present)."""

from __future__ import annotations

import json
import re

import pytest

from scheduling.collectors.actuators import _rest_updates_nodes, parse_scontrol_node
from scheduling.collectors.errors import MalformedResponse, SourceUnavailable
from scheduling.collectors.hostlist import count_index_list, expand_hostlist
from scheduling.collectors.slurm import (
    build_snapshot,
    gpu_count,
    parse_gres,
    parse_job,
    parse_node,
    parse_partition,
    parse_topology,
)
from scheduling.collectors.snapshot import TeamMapping, WorkloadState
from scheduling.engine.types import WorkloadKind

from .conftest import FIXTURES, load_fixture, load_shared, shared_dir


@pytest.fixture(scope="module")
def snapshot():
    topology = parse_topology((FIXTURES / "slurm" / "topology.conf").read_text())
    return build_snapshot(
        "slurm-a",
        load_fixture("slurm", "v0.0.38_nodes.json"),
        load_fixture("slurm", "v0.0.38_jobs.json"),
        load_fixture("slurm", "v0.0.38_partitions.json"),
        topology=topology,
    )


def test_it_expands_slurm_host_lists_keeping_zero_padding():
    assert expand_hostlist("dgx[01-03,07]") == ["dgx01", "dgx02", "dgx03", "dgx07"]
    assert expand_hostlist("a[1-2]b[0-1],c9") == ["a1b0", "a1b1", "a2b0", "a2b1", "c9"]
    assert expand_hostlist("") == [] and expand_hostlist("(null)") == []
    assert count_index_list("0-3") == 4 and count_index_list("1,3,5-7%2") == 5


def test_it_reads_gres_strings_with_types_indices_and_commas_inside_the_index_list():
    assert parse_gres("gpu:h100:5(IDX:0-4)")[0].indices == (0, 1, 2, 3, 4)
    entries = parse_gres("gpu:a100:2(IDX:0,3),gpu:h100:0(IDX:N/A),shard:4")
    assert [(e.name, e.type, e.count) for e in entries] == [
        ("gpu", "a100", 2),
        ("gpu", "h100", 0),
        ("shard", "", 4),
    ]
    assert gpu_count("gpu:h100:8(S:0-1)") == 8 and gpu_count("N/A") == 0 and gpu_count("gres:gpu:2") == 2


def test_it_counts_gpus_total_and_allocated_per_node(snapshot):
    counts = {n.name: (n.gpu_total, n.gpu_allocated) for n in snapshot.nodes}
    assert counts == {
        "dgx01": (8, 5),
        "dgx02": (8, 8),
        "dgx03": (8, 8),
        "dgx04": (8, 0),
        "dgx05": (8, 0),
        "dgx06": (8, 0),
        "dgx07": (8, 0),
        "dgx08": (8, 0),
    }
    assert snapshot.node("dgx01").gpu_allocated_indices == (0, 1, 2, 3, 4)
    assert snapshot.node("dgx01").to_node().gpu_free_whole == 3
    assert snapshot.gpu_total == 64 and snapshot.gpu_allocated == 21


def test_it_reports_drain_flags_and_keeps_drained_and_down_nodes_unschedulable(snapshot):
    dgx02, dgx07, dgx08 = snapshot.node("dgx02"), snapshot.node("dgx07"), snapshot.node("dgx08")
    assert (dgx02.state, dgx02.state_flags, dgx02.reason) == (
        "draining",
        ("DRAIN",),
        "portal: drain busy node",
    )
    assert dgx08.state == "drained" and dgx08.cordoned and not dgx08.schedulable
    assert dgx07.state == "down" and dgx07.reason == "fake hw failure" and not dgx07.schedulable
    assert snapshot.node("dgx04").schedulable and not snapshot.node("dgx04").to_node().pinned


def test_it_places_nodes_on_leaf_switches_and_the_spine(snapshot):
    assert {n.name: n.leaf_switch for n in snapshot.nodes if n.leaf_switch == "leaf1"}.keys() == {
        "dgx01",
        "dgx02",
        "dgx03",
        "dgx04",
    }
    assert {n.spine for n in snapshot.nodes} == {"spine"}
    assert snapshot.node("dgx05").nvlink_domain == "dgx05"
    assert snapshot.errors == ()


def test_it_reads_running_pending_held_and_array_jobs_with_gang_sizes(snapshot):
    jobs = {w.external_id: w for w in snapshot.workloads}
    assert set(jobs) == {"1", "2", "3", "4", "5_[0-3]", "6"}
    gang = jobs["1"]
    assert (gang.state, gang.gang_size, gang.gpus_per_member, gang.nodes) == (
        WorkloadState.RUNNING,
        2,
        8.0,
        ("dgx02", "dgx03"),
    )
    assert gang.kind is WorkloadKind.TRAINING and gang.started_at == 1796225571.0
    assert (jobs["2"].gpus, jobs["3"].gpus) == (4.0, 1.0)  # tres_per_node gres:gpu:h100:4, tres_per_job gpu:1
    big = jobs["4"]
    assert (big.state, big.gang_size, big.gpus, big.pending_reason) == (
        WorkloadState.PENDING,
        8,
        64.0,
        "Resources",
    )
    array = jobs["5_[0-3]"]
    assert (array.instances, array.gpus, array.array_id, array.pending_reason) == (4, 8.0, "5", "Priority")
    assert array.kind is WorkloadKind.HPO
    assert (jobs["6"].state, jobs["6"].pending_reason) == (WorkloadState.HELD, "JobHeldUser")


def test_pending_gpus_count_waiting_work_but_not_held_jobs(snapshot):
    assert snapshot.pending_gpus == 64 + 4 * 2
    assert sum(r.gpus for r in snapshot.pending_requests()) == 72
    assert sum(r.gpus for r in snapshot.running_workloads()) == 21


def test_it_maps_teams_from_account_or_user_with_aliases():
    job = load_fixture("slurm", "v0.0.38_jobs.json")["jobs"][1] | {"account": "llm-proj"}
    assert parse_job(job, orchestrator="s", teams=TeamMapping()).team == "llm-proj"
    assert parse_job(job, orchestrator="s", teams=TeamMapping(aliases={"llm-proj": "llm"})).team == "llm"
    assert parse_job(job, orchestrator="s", teams=TeamMapping(slurm_field="user")).team == "alice"


def test_partitions_become_queues_with_their_gpu_capacity(snapshot):
    queues = {q.name: q for q in snapshot.queues}
    assert (queues["gpu"].gpu_total, queues["debug"].gpu_total) == (64, 16)
    assert queues["debug"].priority_tier == 10 and queues["debug"].nodes == ("dgx01", "dgx02")


def test_v0_0_36_has_no_state_flags_so_a_reason_on_a_live_node_means_drain():
    nodes = {n["name"]: n for n in load_fixture("slurm", "v0.0.36_nodes.json")["nodes"]}
    assert parse_node(nodes["dgx02"], orchestrator="s").state_flags == ("DRAIN",)
    assert parse_node(nodes["dgx08"], orchestrator="s").state == "drained"
    assert parse_node(nodes["dgx07"], orchestrator="s").state_flags == ()
    assert parse_node(nodes["dgx01"], orchestrator="s").gpu_allocated == 5


def test_a_document_with_errors_or_a_missing_key_is_refused_whole():
    nodes = load_fixture("slurm", "v0.0.38_nodes.json")
    jobs = load_fixture("slurm", "v0.0.38_jobs.json")
    parts = load_fixture("slurm", "v0.0.38_partitions.json")
    with pytest.raises(SourceUnavailable):
        build_snapshot("s", nodes | {"errors": [{"error": "Unable to query nodes"}]}, jobs, parts)
    broken = json.loads(json.dumps(nodes))
    del broken["nodes"][3]["gres_used"]
    with pytest.raises(MalformedResponse, match="gres_used"):
        build_snapshot("s", broken, jobs, parts)
    with pytest.raises(MalformedResponse):
        build_snapshot("s", {"meta": {}, "errors": []}, jobs, parts)


def test_the_single_node_answer_matches_the_node_list():
    node = parse_node(load_fixture("slurm", "v0.0.38_node_dgx01.json")["nodes"][0], orchestrator="s")
    assert (node.gpu_total, node.gpu_allocated, node.partitions) == (8, 5, ("gpu", "debug"))


def test_scontrol_node_lines_give_state_flags_and_reason():
    line = (
        "NodeName=dgx02 Arch=x86_64 State=MIXED+DRAIN ThreadsPerCore=2 Partitions=gpu "
        "Reason=portal: drain busy node [root@2026-12-02T15:33:40] Comment=(null)"
    )
    assert parse_scontrol_node(line) == ("mixed", {"DRAIN"}, "portal: drain busy node")
    assert parse_scontrol_node("NodeName=dgx04 State=IDLE Weight=1")[1] == set()


# ------------------------------------------------------------------- every shared Slurm sample


@pytest.mark.parametrize("version", ["v0.0.36", "v0.0.37", "v0.0.38"])
def test_shared_node_lists_of_every_api_version_give_the_same_gpu_counts(version):
    nodes = [parse_node(n, orchestrator="s") for n in load_shared("slurm", f"{version}_nodes.json")["nodes"]]
    assert [(n.name, n.gpu_total, n.gpu_allocated) for n in nodes][:3] == [
        ("dgx01", 8, 5),
        ("dgx02", 8, 8),
        ("dgx03", 8, 8),
    ]
    assert sum(n.gpu_allocated for n in nodes) == 21


def test_shared_topology_conf_and_scontrol_topology_agree():
    path = shared_dir("slurm")
    from_conf = parse_topology((path / "topology.conf").read_text())
    assert from_conf == parse_topology((path / "scontrol_show_topology.txt").read_text())
    assert from_conf["dgx05"].leaf_switch == "leaf2" and from_conf["dgx05"].spine == "spine"


def test_shared_sinfo_states_match_the_parsed_nodes():
    nodes = {n["name"]: parse_node(n, orchestrator="s") for n in load_shared("slurm", "v0.0.38_nodes.json")["nodes"]}
    lines = (shared_dir("slurm") / "sinfo_N_l.txt").read_text().splitlines()[2:]
    for line in lines:
        name, _count, _partition, state = line.split()[:4]
        expected = "idle" if state == "planned" else state  # PLANNED is a flag on an idle node
        assert nodes[name].state == expected, name


def test_shared_squeue_states_and_reasons_match_the_parsed_jobs():
    workloads = {
        w.external_id: w
        for raw in load_shared("slurm", "v0.0.38_jobs.json")["jobs"]
        if (w := parse_job(raw, orchestrator="s", teams=TeamMapping()))
    }
    for line in (shared_dir("slurm") / "squeue_l.txt").read_text().splitlines()[2:]:
        fields = line.split()
        job_id, state, nodes = fields[0], fields[4], int(fields[7])
        assert workloads[job_id].gang_size == nodes
        if state == "PENDING":
            reason = re.search(r"\((\w+)\)$", line)
            if reason:
                assert workloads[job_id].pending_reason == reason.group(1)
        else:
            assert workloads[job_id].state is WorkloadState.RUNNING


def test_shared_single_job_partition_and_submit_request_parse():
    job = parse_job(load_shared("slurm", "v0.0.38_job_1.json")["jobs"][0], orchestrator="s", teams=TeamMapping())
    assert (job.external_id, job.gang_size, job.gpus) == ("1", 2, 16.0)
    gpu = load_shared("slurm", "v0.0.38_partition_gpu.json")["partitions"][0]
    assert parse_partition(gpu, orchestrator="s", gpus_by_node={f"dgx0{i}": 8 for i in range(1, 9)}).gpu_total == 64
    assert gpu_count(load_shared("slurm", "v0.0.38_job_submit_request.json")["job"]["gres"]) == 2


@pytest.mark.parametrize(
    "name",
    [
        "v0.0.38_diag.json",
        "v0.0.38_licenses.json",
        "v0.0.38_reservations.json",
        "v0.0.38_ping.json",
        "v0.0.38_job_delete_response.json",
        "v0.0.38_job_submit_response.json",
    ],
)
def test_shared_envelopes_are_22_05_without_errors(name):
    document = load_shared("slurm", name)
    assert document["meta"]["Slurm"]["release"] == "22.05.8" and document["errors"] == []


def test_shared_config_files_describe_eight_nodes_of_eight_gpus():
    path = shared_dir("slurm")
    conf = (path / "slurm.conf").read_text()
    assert len(re.findall(r"^NodeName=dgx\d+", conf, re.M)) == 8 and "Gres=gpu:h100:8" in conf
    gres = re.search(r"File=\S+nvidia\[(\S+)\]", (path / "gres.conf").read_text())
    assert gres and count_index_list(gres.group(1)) == 8


def test_shared_openapi_spec_and_405_confirm_22_05_cannot_update_nodes_over_rest():
    spec = load_shared("slurm", "openapi_v3.json")
    node_paths = [p for p in spec["paths"] if p.startswith("/slurm/v0.0.38/node/")]
    assert node_paths and all(set(spec["paths"][p]) <= {"get", "delete"} for p in node_paths)
    assert "405" in (shared_dir("slurm") / "v0.0.38_node_update_NOT_SUPPORTED.txt").read_text()
    assert not _rest_updates_nodes("v0.0.38") and _rest_updates_nodes("v0.0.39")


# ------------------------------------------------------- GPU indices (issue 11: busy-time attribution)


def _jobs_doc_with(change):
    doc = load_fixture("slurm", "v0.0.38_jobs.json")
    for job in doc["jobs"]:
        change(job)
    return doc


def _snapshot_of(jobs_doc):
    return build_snapshot(
        "slurm-a",
        load_fixture("slurm", "v0.0.38_nodes.json"),
        jobs_doc,
        load_fixture("slurm", "v0.0.38_partitions.json"),
    )


def test_running_jobs_carry_the_gpu_indices_slurmrestd_reports_per_node(snapshot):
    placed = {w.external_id: (w.nodes, w.node_gpu_indices) for w in snapshot.workloads}
    assert placed["1"] == (("dgx02", "dgx03"), (tuple(range(8)), tuple(range(8))))
    assert placed["2"] == (("dgx01",), ((1, 2, 3, 4),))
    assert placed["3"] == (("dgx01",), ((0,),))
    assert all(not w.node_gpu_indices for w in snapshot.workloads if w.state is not WorkloadState.RUNNING)


def test_the_jobs_indices_on_each_node_are_exactly_its_gres_used_indices(snapshot):
    held: dict[str, set[int]] = {}
    for w in snapshot.workloads:
        for node, indices in zip(w.nodes, w.node_gpu_indices, strict=True):
            assert not held.setdefault(node, set()) & set(indices), "two jobs on one GPU"
            held[node] |= set(indices)
    used = {n.name: set(n.gpu_allocated_indices) for n in snapshot.nodes if n.gpu_allocated_indices}
    assert held == used == {"dgx01": {0, 1, 2, 3, 4}, "dgx02": set(range(8)), "dgx03": set(range(8))}


def test_a_job_without_gres_detail_gets_its_nodes_unclaimed_indices_when_that_is_unambiguous():
    def drop_job_2_detail(job):
        if job["job_id"] == 2:
            job["gres_detail"] = []

    placed = {w.external_id: w.node_gpu_indices for w in _snapshot_of(_jobs_doc_with(drop_job_2_detail)).workloads}
    # dgx01 uses 0-4 and job 3 says it holds 0: job 2, the node's only other job, holds 1-4
    assert placed["2"] == ((1, 2, 3, 4),) and placed["3"] == ((0,),)


def test_two_jobs_without_gres_detail_on_one_node_get_no_indices_rather_than_a_guess():
    def drop_dgx01_details(job):
        if job["job_id"] in (2, 3):
            job["gres_detail"] = []

    placed = {w.external_id: w.node_gpu_indices for w in _snapshot_of(_jobs_doc_with(drop_dgx01_details)).workloads}
    assert placed["2"] == placed["3"] == ()
    assert placed["1"] == (tuple(range(8)), tuple(range(8)))


def test_a_gres_detail_that_does_not_line_up_with_the_nodes_gives_no_indices():
    def one_entry_for_two_nodes(job):
        if job["job_id"] == 1:
            job["gres_detail"] = job["gres_detail"][:1]

    job = next(w for w in _snapshot_of(_jobs_doc_with(one_entry_for_two_nodes)).workloads if w.external_id == "1")
    assert job.nodes == ("dgx02", "dgx03") and job.node_gpu_indices == ()


def test_the_indices_follow_slurms_node_order_from_job_resources():
    def reversed_allocation(job):
        if job["job_id"] == 1:
            job["gres_detail"] = ["gpu:h100:8(IDX:0-7)", "gpu:h100:2(IDX:3,5)"]
            job["job_resources"]["allocated_nodes"].reverse()

    job = next(w for w in _snapshot_of(_jobs_doc_with(reversed_allocation)).workloads if w.external_id == "1")
    assert job.nodes == ("dgx03", "dgx02") and job.node_gpu_indices == (tuple(range(8)), (3, 5))
