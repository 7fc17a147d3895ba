"""KubernetesCollector against a real kube-apiserver whose pods the real kube-scheduler bound and KWOK runs.

Every figure is compared with what typed API queries (the official client's models, as admin) say.
Counting rule under test, the portal's: a node's allocated GPUs are the GPU requests of the pods bound
to it (``spec.nodeName`` set) that have not terminated, whether Running or still Pending (a real cluster
shows bound pods Pending while images pull, and they hold their GPUs all the same).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from kubernetes import client as k8s

from scheduling.collectors import SourceUnavailable
from scheduling.collectors.k8s import KubernetesCollector
from scheduling.collectors.reliability import NO_RETRY
from scheduling.collectors.snapshot import WorkloadState
from scheduling.engine.types import WorkloadKind

from .conftest import GPU, effective_gpus, live_gpu_pods, pinned_release, podgroup_queues, seed

pytestmark = pytest.mark.live


@pytest.fixture
def collector(cluster):
    return KubernetesCollector(cluster.portal, name="k8s-live")


@pytest.fixture
def snapshot(collector):
    return collector.collect()


def test_the_fixture_runs_the_pinned_kubernetes_release_and_reports_its_costs(cluster, record_property):
    # Reported, never asserted: the machine is shared and its load varies.
    record_property("k8s_start_seconds", round(cluster.start_seconds, 2))
    record_property("k8s_seed_seconds", round(cluster.seed_seconds, 2))
    for name, mib in cluster.rss_mib.items():
        record_property(f"{name}_rss_mib", mib)
    version = k8s.VersionApi(cluster.admin).get_code()
    release = pinned_release("k8s.io/kubernetes")
    major, minor = release.removeprefix("v").split(".")[:2]
    assert (version.git_version, version.major, version.minor) == (release, major, minor)
    assert (int(major), int(minor)) >= (1, 34), "a supported release (issue #32)"


def test_every_node_is_seen_with_the_gpus_model_and_block_the_api_reports(cluster, snapshot):
    nodes = cluster.core.list_node().items
    expected = {
        n.metadata.name: (
            int(n.status.allocatable[GPU]),
            n.metadata.labels["nvidia.com/gpu.product"],
            n.metadata.labels["network.topology.kubernetes.io/block"],
            n.metadata.labels["network.topology.kubernetes.io/spine"],
        )
        for n in nodes
    }
    observed = {n.name: (n.gpu_total, n.gpu_model, n.leaf_switch, n.spine) for n in snapshot.nodes}
    assert observed == expected
    assert snapshot.gpu_total == 48 and len(snapshot.nodes) == 6
    assert {n.leaf_switch for n in snapshot.nodes} == {"leaf1", "leaf2"}


def test_allocated_gpus_per_node_are_the_requests_of_bound_pods_that_have_not_terminated(cluster, snapshot):
    expected: dict[str, int] = defaultdict(int)
    for pod in live_gpu_pods(cluster.core):
        if pod.spec.node_name:
            assert pod.status.phase == "Running", "KWOK starts every pod bound to its nodes"
            expected[pod.spec.node_name] += effective_gpus(pod)
    observed = {n.name: n.gpu_allocated for n in snapshot.nodes if n.gpu_allocated}
    assert observed == dict(expected)
    # 2 x 8 (Volcano gang) + 8 + 4 + 2 (init container) + 3 x 2 + 2 x 1; the Succeeded pod's 2 are free.
    assert snapshot.gpu_allocated == 38
    assert snapshot.node("dgx04").gpu_allocated == snapshot.node("dgx05").gpu_allocated == 8
    assert snapshot.node(seed.DRAINED_NODE).gpu_allocated == 0


def test_a_pod_that_succeeded_holds_no_gpus_although_it_is_still_bound(cluster, snapshot):
    ns, name, _gpus = seed.FINISHED
    pod = cluster.core.read_namespaced_pod(name, ns)
    assert pod.status.phase == "Succeeded" and pod.spec.node_name
    assert not any(w.name == name for w in snapshot.workloads)


def test_pending_gpus_are_the_requests_of_pods_no_scheduler_has_bound(cluster, snapshot):
    expected = sum(effective_gpus(p) for p in live_gpu_pods(cluster.core) if not p.spec.node_name)
    assert snapshot.pending_gpus == expected == 16 + 4 * 8


def test_the_pod_the_scheduler_refused_pends_with_its_insufficient_gpu_reason(cluster, snapshot):
    ns, name, gpus = seed.TOO_BIG
    condition = next(
        c for c in cluster.core.read_namespaced_pod(name, ns).status.conditions if c.type == "PodScheduled"
    )
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert f"Insufficient {GPU}" in condition.message
    workload = next(w for w in snapshot.workloads if w.external_id == f"{ns}/pod/{name}")
    assert (workload.state, workload.gpus, workload.team) == (WorkloadState.PENDING, float(gpus), ns)
    assert workload.pending_reason == f"Unschedulable: {condition.message}"


def test_the_volcano_gang_that_cannot_fit_is_one_pending_workload_with_the_podgroups_reason(snapshot):
    ns, group, queue, members, gpus = seed.BLOCKED_GANG
    gang = next(w for w in snapshot.workloads if w.external_id == f"{ns}/{group}")
    assert (gang.state, gang.gang_size, gang.gpus_per_member, gang.queue, gang.kind, gang.user) == (
        WorkloadState.PENDING,
        members,
        float(gpus),
        queue,
        WorkloadKind.TRAINING,
        "bob",
    )
    assert gang.pending_reason.startswith("NotEnoughResources: 4/4 tasks in gang unschedulable")
    assert not gang.nodes


def test_the_running_volcano_gang_holds_two_whole_nodes_of_one_block(cluster, snapshot):
    ns, group, queue, members, gpus, targets = seed.RUNNING_GANG
    gang = next(w for w in snapshot.workloads if w.external_id == f"{ns}/{group}")
    assert (gang.state, gang.gang_size, gang.gpus, gang.queue) == (
        WorkloadState.RUNNING,
        members,
        members * gpus,
        queue,
    )
    assert sorted(gang.nodes) == sorted(targets)
    assert {snapshot.node(n).leaf_switch for n in gang.nodes} == {"leaf2"}


def test_running_and_pending_gpus_per_volcano_queue_equal_the_pods_of_its_podgroups(cluster, snapshot):
    queue_of = podgroup_queues(cluster.custom)
    expected: dict[tuple[str, str], int] = defaultdict(int)
    for pod in live_gpu_pods(cluster.core):
        group = (pod.metadata.annotations or {}).get(seed.GROUP_ANNOTATION)
        if group:
            state = "running" if pod.spec.node_name else "pending"
            expected[(queue_of[f"{pod.metadata.namespace}/{group}"], state)] += effective_gpus(pod)
    observed: dict[tuple[str, str], int] = defaultdict(int)
    for workload in snapshot.workloads:
        if workload.queue:
            observed[(workload.queue, workload.state.value)] += int(workload.gpus)
    assert dict(observed) == dict(expected) == {("research", "running"): 16, ("prod", "pending"): 32}


def test_volcano_queues_are_seen_with_their_weight_guarantee_capability_and_state(cluster, snapshot):
    raw = cluster.custom.list_cluster_custom_object(seed.VOLCANO_GROUP, seed.VOLCANO_VERSION, "queues")["items"]
    expected = {
        q["metadata"]["name"]: (
            q["spec"]["weight"],
            q["spec"].get("guarantee", {}).get("resource", {}).get(GPU),
            q["spec"].get("capability", {}).get(GPU),
            q["spec"]["reclaimable"],
            q["status"]["state"],
        )
        for q in raw
    }
    observed = {
        q.name: (q.weight, q.guaranteed_gpus, q.capability_gpus, q.reclaimable, q.state) for q in snapshot.queues
    }
    assert observed == expected
    assert observed["prod"] == (8, 16, None, False, "Open") and observed["research"][2] == 32
    assert not snapshot.errors


def test_running_gpus_per_team_equal_the_bound_pods_of_each_namespace(cluster, snapshot):
    expected: dict[str, int] = defaultdict(int)
    for pod in live_gpu_pods(cluster.core):
        if pod.spec.node_name:
            expected[pod.metadata.namespace] += effective_gpus(pod)
    observed: dict[str, int] = defaultdict(int)
    for workload in snapshot.workloads:
        if workload.state is WorkloadState.RUNNING:
            observed[workload.team] += int(workload.gpus)
    assert dict(observed) == dict(expected) == {"llm": 24, "vision": 8, "hpo": 6}


def test_workloads_carry_priority_owner_kind_and_init_container_gpus(cluster, snapshot):
    by_name = {w.name: w for w in snapshot.workloads}
    finetune = cluster.core.read_namespaced_pod("finetune", "llm")
    assert by_name["finetune"].priority == finetune.spec.priority == 1000
    assert by_name["serve-a"].kind is WorkloadKind.INFERENCE  # owned by a ReplicaSet
    assert by_name["trial-0"].kind is WorkloadKind.BATCH and by_name["trial-0"].user == "carol"
    assert by_name["prep"].gpus == 2.0  # its init container wants 2, its app container 1


def test_the_cordoned_and_tainted_node_is_unschedulable_and_shows_why(cluster, snapshot):
    raw = cluster.core.read_node(seed.DRAINED_NODE)
    node = snapshot.node(seed.DRAINED_NODE)
    assert raw.spec.unschedulable and node.cordoned and not node.schedulable
    assert node.state == "ready" and "cordoned" in node.state_flags
    assert {(t.key, t.value, t.effect) for t in node.taints} == {(t.key, t.value, t.effect) for t in raw.spec.taints}
    others = [n for n in snapshot.nodes if n.name != seed.DRAINED_NODE]
    assert all(n.schedulable and n.state == "ready" and not n.taints for n in others)


def test_reading_in_pages_of_two_gives_the_same_snapshot(cluster, snapshot):
    # Real continue tokens from the apiserver: 6 nodes and ~17 pods take several pages each.
    paged = KubernetesCollector(cluster.portal, name="k8s-live", page_size=2).collect()
    assert paged.nodes == snapshot.nodes
    assert sorted(paged.workloads, key=lambda w: w.external_id) == sorted(
        snapshot.workloads, key=lambda w: w.external_id
    )
    assert (paged.queues, paged.pending_gpus) == (snapshot.queues, snapshot.pending_gpus)


def test_a_pod_the_scheduler_binds_after_a_collect_is_counted_by_the_next_one(cluster, collector):
    before = collector.collect()
    free = [n for n in before.nodes if n.schedulable and n.gpu_free >= 1]
    assert free, "the seeded fleet leaves 2 GPUs free"
    pod = seed.Pod("hpo", "late-trial", 1, user="carol")
    cluster.core.create_namespaced_pod("hpo", seed.pod_body(pod))
    try:
        node = seed.wait("late-trial to be bound", lambda: seed.bound_node(cluster.core, "hpo", "late-trial"))
        after = collector.collect()
        assert after.node(node).gpu_allocated == before.node(node).gpu_allocated + 1
        assert after.gpu_allocated == before.gpu_allocated + 1
        cluster.core.patch_namespaced_pod_status("late-trial", "hpo", {"status": {"phase": "Failed"}})
        assert collector.collect().gpu_allocated == before.gpu_allocated  # a Failed pod frees its GPUs
    finally:
        cluster.core.delete_namespaced_pod("late-trial", "hpo", grace_period_seconds=0)


def test_a_pod_being_deleted_keeps_its_gpus_until_it_is_gone(cluster, collector):
    # Deletion of a bound pod waits for its kubelet to stop the containers; until then the scheduler
    # still reserves its GPUs, and so does the portal. KWOK removes it when its 30 s grace period ends.
    pod = seed.Pod("hpo", "leaving-trial", 1, user="carol")
    cluster.core.create_namespaced_pod("hpo", seed.pod_body(pod))
    try:
        node = seed.wait("leaving-trial to be bound", lambda: seed.bound_node(cluster.core, "hpo", "leaving-trial"))
        before = collector.collect().node(node).gpu_allocated
        cluster.core.delete_namespaced_pod("leaving-trial", "hpo", grace_period_seconds=30)
        assert cluster.core.read_namespaced_pod("leaving-trial", "hpo").metadata.deletion_timestamp
        assert collector.collect().node(node).gpu_allocated == before
    finally:
        cluster.core.delete_namespaced_pod("leaving-trial", "hpo", grace_period_seconds=0)
    seed.wait(
        "leaving-trial to be gone",
        lambda: not any(p.metadata.name == "leaving-trial" for p in live_gpu_pods(cluster.core)),
    )
    assert collector.collect().node(node).gpu_allocated == before - 1


def test_a_rejected_token_is_a_source_unavailable_error_that_is_not_retried(cluster):
    configuration = k8s.Configuration()
    configuration.host = cluster.env["K8S_API_URL"]
    configuration.ssl_ca_cert = str(cluster.state / "pki" / "ca.crt")
    configuration.api_key = {"authorization": "Bearer not-a-token"}
    with k8s.ApiClient(configuration) as api_client:
        collector = KubernetesCollector(api_client, retry=NO_RETRY, sleep=lambda _s: pytest.fail("must not retry"))
        with pytest.raises(SourceUnavailable) as error:
            collector.collect()
    assert error.value.status == 401 and not error.value.retryable


def test_a_partly_bound_elastic_gang_counts_only_its_bound_members_as_running(cluster, collector):
    ns, group, queue = "hpo", "elastic", "default"
    seed.create_podgroup(cluster.custom, ns, group, queue, 1, 1, {"phase": "Running", "running": 1, "conditions": []})
    node = next(n.name for n in collector.collect().nodes if n.schedulable and n.gpu_free >= 1)
    names = [f"{group}-0", f"{group}-1"]
    try:
        for name in names:
            pod = seed.pod_body(seed.Pod(ns, name, 1), scheduler="volcano", group=group, queue=queue)
            cluster.core.create_namespaced_pod(ns, pod)
        seed.bind(cluster.core, ns, names[0], node)  # Volcano placed one member; the other still waits
        snapshot = collector.collect()
        running = sum(w.gpus for w in snapshot.workloads if w.queue == queue and w.state is WorkloadState.RUNNING)
        pending = sum(w.gpus for w in snapshot.workloads if w.queue == queue and w.state is WorkloadState.PENDING)
        assert snapshot.node(node).gpu_allocated >= 1
        assert (running, pending) == (1.0, 1.0)
        parts = {w.external_id: w for w in snapshot.workloads if w.name == group}
        assert set(parts) == {f"{ns}/{group}", f"{ns}/{group}:pending"}
        assert (parts[f"{ns}/{group}"].nodes, parts[f"{ns}/{group}:pending"].nodes) == ((node,), ())
        assert sum(w.gpus for w in snapshot.workloads if w.state is WorkloadState.PENDING) == snapshot.pending_gpus
    finally:
        for name in names:
            cluster.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        cluster.custom.delete_namespaced_custom_object(seed.VOLCANO_GROUP, seed.VOLCANO_VERSION, ns, "podgroups", group)
