"""Kubernetes + Volcano parsers against recorded kube-apiserver v1.20 answers (the live apiserver tests
are in tests/k8s_live). Bad pages (cut off, mistyped) cannot be had from a real apiserver: here the
list call is a stand-in serving bytes, and the collector's own paging and decoding run on them."""

from __future__ import annotations

import copy
import json
import re

import pytest

from scheduling.collectors import k8s_wire as wire
from scheduling.collectors.errors import MalformedResponse
from scheduling.collectors.k8s import KubernetesCollector, build_snapshot, epoch, pod_gpus
from scheduling.collectors.reliability import NO_RETRY
from scheduling.collectors.snapshot import TeamMapping, WorkloadState
from scheduling.engine.types import WorkloadKind

from .conftest import load_fixture, load_shared, shared_dir


def _nodes_with_cordoned_dgx08():
    nodes = [n for n in load_fixture("k8s", "nodelist.json")["items"] if n["metadata"]["name"] != "dgx08"]
    return [*nodes, load_fixture("k8s", "node_dgx08_cordoned_tainted.json")]


@pytest.fixture(scope="module")
def snapshot():
    return build_snapshot(
        "k8s-a",
        nodes=_nodes_with_cordoned_dgx08(),
        pods=load_fixture("k8s", "podlist.json")["items"],
        queues=load_fixture("k8s", "volcano_queuelist.json")["items"],
        podgroups=load_fixture("k8s", "volcano_podgrouplist.json")["items"],
    )


def test_it_reads_allocatable_gpus_and_sums_bound_pod_requests_per_node(snapshot):
    allocated = {n.name: n.gpu_allocated for n in snapshot.nodes if n.gpu_allocated}
    assert allocated == {"dgx04": 8, "dgx06": 1, "dgx07": 2, "dgx08": 8}
    assert all(n.gpu_total == 8 for n in snapshot.nodes) and snapshot.gpu_total == 64


def test_it_reads_topology_and_model_from_node_labels(snapshot):
    dgx05 = snapshot.node("dgx05")
    assert (dgx05.leaf_switch, dgx05.spine, dgx05.gpu_model, dgx05.nvlink_domain) == (
        "leaf2",
        "spine1",
        "NVIDIA-H100-80GB-HBM3",
        "dgx05",
    )


def test_a_cordoned_and_tainted_node_is_not_schedulable(snapshot):
    dgx08 = snapshot.node("dgx08")
    assert dgx08.cordoned and not dgx08.schedulable and dgx08.state_flags == ("cordoned",)
    assert [(t.key, t.value, t.effect) for t in dgx08.taints] == [("portal.example.com/drain", "maint", "NoSchedule")]
    assert snapshot.node("dgx01").schedulable and snapshot.node("dgx01").state == "ready"


def test_only_a_gpu_device_plugin_taint_leaves_a_node_schedulable():
    node = load_fixture("k8s", "nodelist.json")["items"][0]
    tainted = node | {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}
    (parsed,) = build_snapshot("k", nodes=[tainted], pods=[]).nodes
    assert parsed.schedulable


def test_pod_groups_become_gangs_with_volcano_reasons_and_queues(snapshot):
    workloads = {w.external_id: w for w in snapshot.workloads}
    big = workloads["ml/big-run"]
    assert (big.state, big.gang_size, big.gpus_per_member, big.queue) == (
        WorkloadState.PENDING,
        4,
        8.0,
        "prod",
    )
    assert big.pending_reason == "NotEnoughResources: 4/4 tasks in gang unschedulable: pod group is not ready"
    train = workloads["ml/llm-pretrain"]
    assert (train.state, train.gang_size, set(train.nodes), train.kind) == (
        WorkloadState.RUNNING,
        2,
        {"dgx04", "dgx08"},
        WorkloadKind.TRAINING,
    )
    assert train.started_at == epoch("2026-12-02T15:32:40Z")
    assert workloads["ml/queued"].pending_reason == "Inqueue"


def test_a_lone_pod_keeps_its_pod_scheduled_reason(snapshot):
    too_big = next(w for w in snapshot.workloads if w.name == "too-big-0")
    assert (too_big.state, too_big.gpus, too_big.user) == (WorkloadState.PENDING, 16.0, "carol")
    assert too_big.pending_reason == "Unschedulable: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu."


def test_pending_gpus_are_the_unbound_pods_requests(snapshot):
    assert snapshot.pending_gpus == 4 * 8 + 8 + 16
    assert sum(w.gpus for w in snapshot.workloads if w.state is WorkloadState.PENDING) == snapshot.pending_gpus


def test_teams_come_from_the_namespace_or_a_label():
    pods = load_fixture("k8s", "podlist.json")["items"]
    by_namespace = build_snapshot("k", nodes=[], pods=pods)
    assert {w.team for w in by_namespace.workloads} == {"ml"}
    by_label = build_snapshot("k", nodes=[], pods=pods, teams=TeamMapping(k8s_label="user"))
    assert {w.team for w in by_label.workloads} == {"alice", "bob", "carol"}


def test_volcano_queues_carry_weight_guarantee_and_capability(snapshot):
    queues = {q.name: q for q in snapshot.queues}
    assert (queues["prod"].weight, queues["prod"].guaranteed_gpus, queues["prod"].reclaimable) == (
        8.0,
        16,
        False,
    )
    assert (queues["research"].capability_gpus, queues["default"].capability_gpus) == (32, None)


def test_pod_gpus_take_requests_else_limits_and_the_largest_init_container():
    pod = {
        "spec": {
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": {}}],
            "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "4"}}}],
        }
    }
    assert pod_gpus(pod) == 4
    with pytest.raises(MalformedResponse):
        pod_gpus({"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "lots"}}}]}})


def test_a_node_without_metadata_is_malformed():
    with pytest.raises(MalformedResponse):
        build_snapshot("k", nodes=[{"status": {}}], pods=[])


# ------------------------------------------------------------------------ every shared k8s sample


def test_shared_smoke_output_agrees_with_parsed_gpu_counts():
    snapshot = build_snapshot(
        "k",
        nodes=load_shared("k8s", "nodelist.json")["items"],
        pods=load_shared("k8s", "podlist.json")["items"],
    )
    text = (shared_dir("k8s") / "portal_smoke_output.txt").read_text()
    for name, used, total in re.findall(r"^(dgx\d+): (\d+)/(\d+) GPUs", text, re.M):
        node = snapshot.node(name)
        assert (node.gpu_allocated, node.gpu_total) == (int(used), int(total)), name


def test_shared_cordoned_node_and_volcano_lists_parse():
    snapshot = build_snapshot(
        "k",
        nodes=[load_shared("k8s", "node_dgx08_cordoned_tainted.json")],
        pods=[],
        queues=load_shared("k8s", "volcano_queuelist.json")["items"],
        podgroups=load_shared("k8s", "volcano_podgrouplist.json")["items"],
    )
    assert snapshot.node("dgx08").cordoned and len(snapshot.queues) == 3


def test_shared_events_name_the_same_unschedulable_pod():
    events = load_shared("k8s", "events_ml.json")["items"]
    failed = {e["involvedObject"]["name"] for e in events if e["reason"] == "FailedScheduling"}
    assert failed == {"too-big-0"}


def test_shared_volcano_discovery_has_cluster_queues_and_namespaced_pod_groups():
    resources = {r["name"]: r for r in load_shared("k8s", "apis_scheduling.volcano.sh_v1beta1.json")["resources"]}
    assert not resources["queues"]["namespaced"] and resources["podgroups"]["namespaced"]
    assert "list" in resources["podgroups"]["verbs"]
    assert load_shared("k8s", "version.json")["gitVersion"] == "v1.20.2"


def _elastic_gang(bound_to: list[str | None]):
    """A Running PodGroup (minMember 1, Volcano elastic) whose pods are bound as ``bound_to`` says."""
    pods = load_fixture("k8s", "podlist.json")["items"]
    template = next(p for p in pods if p["metadata"]["name"] == "big-run-0")
    group = copy.deepcopy(next(g for g in load_fixture("k8s", "volcano_podgrouplist.json")["items"]))
    group["metadata"]["name"], group["spec"]["minMember"] = "elastic", 1
    group["status"] = {"phase": "Running", "running": 1}
    members = []
    for i, node in enumerate(bound_to):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"elastic-{i}"
        pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "elastic"
        if node:
            pod["spec"]["nodeName"] = node
        members.append(pod)
    return build_snapshot("k", nodes=[], pods=members, podgroups=[group])


def test_a_partly_bound_elastic_gang_is_a_running_part_and_a_pending_remainder():
    snapshot = _elastic_gang(["dgx01", "dgx02", None])
    parts = {w.external_id: w for w in snapshot.workloads}
    running, waiting = parts["ml/elastic"], parts["ml/elastic:pending"]
    assert (running.state, running.gang_size, running.nodes) == (WorkloadState.RUNNING, 2, ("dgx01", "dgx02"))
    assert (waiting.state, waiting.gang_size, waiting.nodes) == (WorkloadState.PENDING, 1, ())
    assert running.kind == waiting.kind == WorkloadKind.TRAINING and waiting.name == "elastic"
    assert snapshot.pending_gpus == waiting.gpus == 8.0


def test_a_wholly_bound_or_wholly_unbound_gang_is_one_workload():
    assert [w.external_id for w in _elastic_gang(["dgx01", "dgx02"]).workloads] == ["ml/elastic"]
    (waiting,) = _elastic_gang([None, None]).workloads
    assert (waiting.external_id, waiting.state, waiting.gang_size) == ("ml/elastic", WorkloadState.PENDING, 2)


class _Pages:
    """The official client's list call with ``_preload_content=False``: bytes per ``continue`` token."""

    def __init__(self, bodies):
        self.bodies, self.calls = bodies, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs.get("_continue"))
        body = self.bodies[len(self.calls) - 1]
        return type("Response", (), {"data": body, "release_conn": lambda self: None})()


def _page(items, token=""):
    return json.dumps({"kind": "PodList", "metadata": {"continue": token}, "items": items}).encode()


@pytest.fixture
def lister():
    from kubernetes import client

    return KubernetesCollector(client.ApiClient(), retry=NO_RETRY, page_size=2)


def test_pages_are_followed_by_their_continue_tokens_and_gpu_less_pods_dropped_as_they_arrive(lister):
    pods = load_fixture("k8s", "podlist.json")["items"]
    cpu_only = {"metadata": {"name": "web", "namespace": "ml"}, "spec": {"containers": [{"name": "web"}]}}
    call = _Pages([_page(pods[:2], "t1"), _page([cpu_only, pods[2]], "t2"), _page(pods[3:])])
    items = lister.list_all("pods", call, kind=wire.PodList, keep=lambda p: pod_gpus(p) > 0)
    assert call.calls == [None, "t1", "t2"]
    assert [p.metadata.name for p in items] == [p["metadata"]["name"] for p in pods]


@pytest.mark.parametrize(
    ("last_page", "message"),
    [
        (_page([{"metadata": {"name": "x"}}])[:-7], "not whole JSON"),  # cut off mid-document
        (b'{"items": [{"metadata": {"name": "x"}, "spec": {"nodeName": 7}}]}', r"\$\.items\[0\]\.spec\.nodeName"),
        (b'{"metadata": {}}', "missing required field `items`"),
    ],
)
def test_a_bad_page_after_good_ones_fails_the_whole_list(lister, last_page, message):
    pods = load_fixture("k8s", "podlist.json")["items"]
    call = _Pages([_page(pods[:2], "t1"), last_page])
    with pytest.raises(MalformedResponse, match=message):
        lister.list_all("pods", call, kind=wire.PodList)
