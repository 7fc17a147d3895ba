"""Ray dashboard parsers against recorded Ray 2.60 answers (fixtures/ always, shared samples when present)."""

from __future__ import annotations

import re

import pytest

from scheduling.collectors.errors import MalformedResponse, SourceUnavailable
from scheduling.collectors.ray import _JobIndex, build_snapshot, load_report, pending_gpus, state_api_items
from scheduling.collectors.snapshot import TeamMapping, WorkloadState
from scheduling.engine.owners import Claim, NameKind
from scheduling.engine.types import WorkloadKind

from .conftest import load_fixture, load_shared, shared_dir


def _documents(**overrides):
    documents = {
        "nodes_doc": load_fixture("ray", "api_v0_nodes_detail_true.json"),
        "status_doc": load_fixture("ray", "api_cluster_status.json"),
        "jobs_doc": load_fixture("ray", "api_jobs.json"),
        "placement_groups_doc": load_fixture("ray", "api_v0_placement_groups_detail_true.json"),
        "tasks_doc": load_fixture("ray", "api_v0_tasks_detail_true_limit_100.json"),
        "actors_doc": load_fixture("ray", "api_v0_actors_detail_true.json"),
    }
    return documents | overrides


@pytest.fixture(scope="module")
def snapshot():
    return build_snapshot("ray-a", **_documents())


def test_it_reads_gpu_total_and_used_per_node_from_usage_by_node(snapshot):
    counts = {n.name: (n.gpu_total, n.gpu_allocated) for n in snapshot.nodes}
    assert counts == {"ray-head": (8, 8), "ray-worker-1": (8, 8), "ray-worker-2": (8, 8)}
    head = snapshot.node("ray-head")
    assert (head.gpu_model, head.leaf_switch, head.address, head.state) == (
        "NVIDIA-H100-80GB-HBM3",
        "leaf1",
        "127.0.3.1",
        "alive",
    )
    assert snapshot.node("ray-worker-2").leaf_switch == "leaf2"


def test_pending_gpus_sum_task_demand_and_placement_group_bundles(snapshot):
    # resourceDemand: 3 x {GPU: 4} + 1 x {GPU: 16}; pgDemand: one STRICT_SPREAD group of 2 x {GPU: 8}
    assert snapshot.pending_gpus == 3 * 4 + 16 + 2 * 8


def test_placement_groups_are_gangs_and_gpu_tasks_and_actors_single_members(snapshot):
    by_name = {}
    for w in snapshot.workloads:
        by_name.setdefault(w.name, []).append(w)
    (train,) = by_name["pg-train"]
    assert (train.state, train.gang_size, train.gpus_per_member, set(train.nodes)) == (
        WorkloadState.RUNNING,
        2,
        8.0,
        {"ray-worker-1", "ray-worker-2"},
    )
    assert train.kind is WorkloadKind.TRAINING
    (big,) = by_name["pg-big"]
    assert (big.state, big.gpus, big.pending_reason) == (WorkloadState.PENDING, 16.0, "NO_RESOURCES")
    assert [w.state for w in by_name["gpu_sleep_pending"]] == [WorkloadState.PENDING] * 3
    assert [w.nodes for w in by_name["gpu_sleep_running"]] == [("ray-head",)] * 2
    (actor,) = by_name["gpu-actor"]
    assert (actor.state, actor.gpus, actor.nodes) == (WorkloadState.RUNNING, 4.0, ("ray-head",))
    assert "JobSupervisor" not in by_name and "_ray_internal_job_actor_portal-demo-1796225579" not in by_name


def test_running_work_accounts_for_every_used_gpu(snapshot):
    assert sum(w.gpus for w in snapshot.workloads if w.state is WorkloadState.RUNNING) == snapshot.gpu_allocated


def test_pending_workloads_add_up_to_the_autoscaler_demand(snapshot):
    assert sum(w.gpus for w in snapshot.workloads if w.state is WorkloadState.PENDING) == snapshot.pending_gpus


def test_teams_come_from_job_metadata_then_the_entrypoint(snapshot):
    assert {(w.team, w.user) for w in snapshot.workloads} == {("llm", "alice")}
    jobs = [{"job_id": "03000000", "entrypoint": "python train.py --team=vision", "metadata": {}}]
    assert _JobIndex(jobs, TeamMapping()).owner("03000000") == {"team": "vision", "user": "", "claims": (),
                                                               "submission_id": ""}
    assert _JobIndex(jobs, TeamMapping()).owner("unknown") == {"team": "unassigned", "user": "", "claims": (),
                                                              "submission_id": ""}


def test_the_submitter_comes_from_metadata_user_or_submitter_before_the_legacy_owner_key():
    jobs = [
        {"job_id": "01", "metadata": {"submitter": "bob", "owner": "carol"}},
        {"job_id": "02", "metadata": {"owner": "carol"}},
    ]
    index = _JobIndex(jobs, TeamMapping())
    assert index.owner("01")["claims"] == (Claim(NameKind.RAY_SUBMITTER, "bob"),)
    assert index.owner("02")["user"] == "carol"


def test_a_truncated_or_partial_listing_is_refused_whole():
    nodes = load_fixture("ray", "api_v0_nodes_detail_true.json")
    truncated = nodes | {"data": {"result": nodes["data"]["result"] | {"total": 4000, "num_after_truncation": 3}}}
    with pytest.raises(MalformedResponse, match="truncated"):
        build_snapshot("r", **_documents(nodes_doc=truncated))
    partial = nodes | {"data": {"result": nodes["data"]["result"] | {"partial_failure_warning": "1 node down"}}}
    with pytest.raises(MalformedResponse, match="partial"):
        build_snapshot("r", **_documents(nodes_doc=partial))
    with pytest.raises(SourceUnavailable):
        build_snapshot("r", **_documents(nodes_doc={"result": False, "msg": "GCS unreachable"}))


def test_a_status_without_usage_for_a_live_gpu_node_is_malformed():
    status = load_fixture("ray", "api_cluster_status.json")
    report = status["data"]["clusterStatus"]["loadMetricsReport"]
    report = report | {"usageByNode": {k: v for k, v in report["usageByNode"].items() if not k.startswith("886")}}
    status = status | {
        "data": status["data"] | {"clusterStatus": status["data"]["clusterStatus"] | {"loadMetricsReport": report}}
    }
    with pytest.raises(MalformedResponse, match="no GPU usage"):
        build_snapshot("r", **_documents(status_doc=status))
    with pytest.raises(MalformedResponse):
        load_report({"result": True, "data": {"clusterStatus": {}}})
    with pytest.raises(MalformedResponse):
        pending_gpus({"resourceDemand": [[{"GPU": 1.0}]], "pgDemand": []})


# ------------------------------------------------------------------------ every shared Ray sample


def test_shared_non_detail_nodes_and_single_job_parse_the_same():
    snapshot = build_snapshot(
        "r",
        **_documents(
            nodes_doc=load_shared("ray", "api_v0_nodes.json"),
            jobs_doc=[load_shared("ray", "api_jobs_SUBMISSION_ID.json")],
        ),
    )
    assert snapshot.gpu_total == 24 and snapshot.gpu_allocated == 24
    assert {w.team for w in snapshot.workloads} == {"llm"}


def test_shared_formatted_status_agrees_used_plus_reserved_gpus():
    text = load_shared("ray", "api_cluster_status_format_1.json")["data"]["clusterStatus"]
    used, total, reserved = re.search(r"([\d.]+)/([\d.]+) GPU \(0\.0 used of ([\d.]+) reserved", text).groups()
    assert float(total) == 24 and float(used) + float(reserved) == 24  # usageByNode counts reservations
    assert "3+ pending tasks/actors" in text and "STRICT_SPREAD" in text


def test_shared_task_summary_counts_the_same_pending_tasks():
    summary = load_shared("ray", "api_v0_tasks_summarize.json")["data"]["result"]["result"]
    counts = summary["node_id_to_summary"]["cluster"]["summary"]
    pending = sum(f["state_counts"].get("PENDING_NODE_ASSIGNMENT", 0) for f in counts.values())
    tasks = build_snapshot("r", **_documents()).workloads
    assert pending == sum(1 for w in tasks if w.external_id.startswith("task:") and w.state is WorkloadState.PENDING)


def test_shared_prometheus_and_node_summary_agree_with_head_usage():
    prom = (shared_dir("ray") / "metrics_head_ray_resources.prom").read_text()
    used = re.search(r'Name="GPU",NodeAddress="127\.0\.3\.1".*State="USED".*\} ([\d.]+)', prom)
    assert used and float(used.group(1)) == 8.0
    summary = load_shared("ray", "nodes_view_summary.json")["data"]["summary"]
    head = next(n for n in summary if n["ip"] == "127.0.3.1")
    slots = sum(
        s["allocation"]
        for w in head["raylet"]["coreWorkersStats"]
        for s in (w.get("usedResources") or {}).get("GPU", {}).get("resourceSlots", [])
    )
    assert slots == 8.0


@pytest.mark.parametrize(
    "name,rows", [("api_v0_jobs.json", 1), ("api_v0_workers.json", 7), ("api_v0_cluster_events.json", 3)]
)
def test_shared_other_state_listings_are_whole(name, rows):
    assert len(state_api_items(load_shared("ray", name), name)) == rows


def test_shared_version_and_health_answers():
    assert load_shared("ray", "api_version.json")["ray_version"] == "2.60.0"
    assert (shared_dir("ray") / "api_gcs_healthz.json").read_text().strip() == "success"


def test_every_gpu_workload_names_its_jobs_submission_id_and_a_hand_started_driver_none(snapshot):
    """Reclaim stops a Ray borrower through the Jobs API, by the submission id of the job a placement group, task
    or actor belongs to (issue 31 item 3); a driver started by hand (``type: DRIVER``) has none."""
    assert {w.submission_id for w in snapshot.workloads} == {"portal-demo-1796225579"}
    jobs = load_fixture("ray", "api_jobs.json")
    by_hand = [{**job, "submission_id": None, "type": "DRIVER"} for job in jobs]
    assert {w.submission_id for w in build_snapshot("ray-a", **_documents(jobs_doc=by_hand)).workloads} == {""}


def test_the_shared_samples_jobs_api_answer_gives_the_submission_id_of_its_workloads():
    documents = _documents(**{
        "jobs_doc": load_shared("ray", "api_jobs.json"),
        "placement_groups_doc": load_shared("ray", "api_v0_placement_groups_detail_true.json"),
    })
    submission = load_shared("ray", "api_jobs_SUBMISSION_ID.json")["submission_id"]
    groups = [w for w in build_snapshot("ray-a", **documents).workloads if w.external_id.startswith("pg:")]
    assert groups and {w.submission_id for w in groups} == {submission}
