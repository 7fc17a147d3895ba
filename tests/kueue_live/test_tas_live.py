"""Issue 32 item 6: Kueue v0.17's topology-aware scheduling (TAS) places a gang whole within one block.

The fixture's 4 nodes sit in two blocks (kq00, kq01 in leaf1; kq02, kq03 in leaf2). Pods the test binds itself
(``spec.nodeName``, no scheduler) leave 4 free GPUs on each of kq00, kq01 and kq02 and none on kq03: leaf1 has 8
free GPUs, leaf2 has 4. The leaf1 nodes also carry most of their CPU in use, so kube-scheduler's default
scoring (least allocated CPU and memory) prefers kq02 for the first pod of a gang and then must put the second
in leaf1: a 2 x 4-GPU gang is split across the blocks. The control shows it does. Through a ClusterQueue whose
ResourceFlavor has a ``topologyName`` and with ``kueue.x-k8s.io/podset-required-topology`` on the pod template,
Kueue admits the gang to leaf1 (the only block it fits in), its pods wait behind the ``kueue.x-k8s.io/topology``
scheduling gate until Kueue's ungater gives each a node, and both run in leaf1.

Fails where TAS is not configured: without the flavor's topology Kueue never admits the Job; without the
feature gate it admits on quota and kube-scheduler splits the gang as in the control.
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from tests.k8s_live.conftest import load_script, seed, wait_for

from .conftest import GPUS_PER_NODE, KUEUE, block_of

pytestmark = [pytest.mark.live]

GPU = "nvidia.com/gpu"
BLOCK = "network.topology.kubernetes.io/block"
HOSTNAME = "kubernetes.io/hostname"
NS = "tas"
TOPOLOGY, FLAVOR, QUEUE = "gpuportal-blocks", "tas-flavor", "tas"
# node -> (GPUs, CPUs) the test's own pods hold there: leaf1 has 8 GPUs free (4 + 4), leaf2 4 (4 + 0)
HELD = {"kq00": (4, 200), "kq01": (4, 200), "kq02": (4, 1), "kq03": (GPUS_PER_NODE, 1)}
kueue_script = load_script("kueue")


def pod(name: str, node: str, gpus: int, cpus: int) -> dict:
    resources = {"requests": {GPU: str(gpus), "cpu": str(cpus)}, "limits": {GPU: str(gpus), "cpu": str(cpus)}}
    return {"metadata": {"name": name}, "spec": {
        "nodeName": node, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/gpuportal/hold:1", "resources": resources}]}}


def gang(name: str, members: int, gpus: int, queue: str | None = None, required_level: str | None = None) -> dict:
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    template: dict = {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [
        {"name": "main", "image": "registry.invalid/gpuportal/train:1", "resources": resources}]}}
    if required_level:
        template["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-required-topology": required_level}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
            "spec": {"parallelism": members, "completions": members, "backoffLimit": 0, "template": template}}


def bound_nodes(cluster, job: str) -> list[str]:
    pods = cluster.core.list_namespaced_pod(NS, label_selector=f"job-name={job}").items
    return sorted(p.spec.node_name for p in pods if p.spec.node_name and not p.metadata.deletion_timestamp)


def blocks(nodes: list[str]) -> set[str]:
    return {block_of(int(node.removeprefix("kq"))) for node in nodes}


def node_blocks(cluster) -> dict[str, str]:
    return {n.metadata.name: n.metadata.labels[BLOCK] for n in cluster.core.list_node().items}


def assigned_nodes(assignment: dict) -> list[str]:
    """The hostnames of a v1beta2 TopologyAssignment: each slice's values at its (only) level are either one
    ``universal`` value or ``individual`` ones, written compactly as prefix + root + suffix."""
    nodes = []
    for part in assignment["slices"]:
        [values] = part["valuesPerLevel"]
        if "universal" in values:
            nodes.append(values["universal"])
            continue
        individual = values["individual"]
        nodes += [individual.get("prefix", "") + root + individual.get("suffix", "") for root in individual["roots"]]
    return sorted(nodes)


@pytest.fixture
def held(kueue_cluster):
    """The namespace with the GPUs and CPUs of HELD taken on each node; Kueue's TAS objects removed after."""
    cluster = kueue_cluster
    cluster.core.create_namespace({"metadata": {"name": NS}})
    try:
        for node, (gpus, cpus) in HELD.items():
            cluster.core.create_namespaced_pod(NS, pod(f"hold-{node}", node, gpus, cpus))
        running = lambda: all(  # noqa: E731
            p.status.phase == "Running" for p in cluster.core.list_namespaced_pod(NS).items)
        wait_for(running, timeout=60, what="KWOK to run the pods holding GPUs")
        yield cluster
    finally:
        cluster.core.delete_namespace(NS)
        for plural, name in (("clusterqueues", QUEUE), ("resourceflavors", FLAVOR), ("topologies", TOPOLOGY)):
            try:
                cluster.custom.delete_cluster_custom_object(*KUEUE, plural, name)
            except ApiException as error:
                if error.status != 404:
                    raise
        gone = lambda: NS not in {n.metadata.name for n in cluster.core.list_namespace().items}  # noqa: E731
        wait_for(gone, timeout=120, what=f"the namespace controller to empty and delete {NS}")


def test_kueue_tas_places_a_two_member_gang_within_one_block_where_kube_scheduler_splits_it(held) -> None:
    cluster = held
    assert node_blocks(cluster) == {f"kq{i:02d}": block_of(i) for i in range(4)}

    # control: the same gang without Kueue; kube-scheduler binds pod by pod and splits it across the blocks
    cluster.batch.create_namespaced_job(NS, gang("plain", 2, 4))
    split = wait_for(lambda: len(bound_nodes(cluster, "plain")) == 2 and bound_nodes(cluster, "plain"),
                     timeout=60, what="kube-scheduler to bind the plain gang")
    assert blocks(split) == {"leaf1", "leaf2"}, split
    cluster.batch.delete_namespaced_job("plain", NS, propagation_policy="Orphan")  # the fixture has no GC
    cluster.core.delete_collection_namespaced_pod(NS, label_selector="job-name=plain", grace_period_seconds=0)
    wait_for(lambda: not bound_nodes(cluster, "plain"), timeout=60, what="the plain gang's pods to go")

    # TAS: a Topology (block, then hostname), a flavor on it, a ClusterQueue and a LocalQueue
    topology, flavor = kueue_script.tas_bodies(TOPOLOGY, FLAVOR, [BLOCK, HOSTNAME],
                                               {"nvidia.com/gpu.product": seed.PRODUCT})
    cluster.custom.create_cluster_custom_object(*KUEUE, "topologies", topology)
    cluster.custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
    quota = {"name": GPU, "nominalQuota": 4 * GPUS_PER_NODE}
    cluster.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": QUEUE},
        "spec": {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [quota]}]}]}})
    cluster.custom.create_namespaced_custom_object(*KUEUE, NS, "localqueues", {
        "apiVersion": "/".join(KUEUE), "kind": "LocalQueue", "metadata": {"name": QUEUE},
        "spec": {"clusterQueue": QUEUE}})
    cluster.batch.create_namespaced_job(NS, gang("tas", 2, 4, queue=QUEUE, required_level=BLOCK))

    try:
        placed = wait_for(lambda: len(bound_nodes(cluster, "tas")) == 2 and bound_nodes(cluster, "tas"),
                          timeout=90, what="Kueue to admit the TAS gang and kube-scheduler to bind it")
    except TimeoutError:
        [workload] = cluster.custom.list_namespaced_custom_object(*KUEUE, NS, "workloads")["items"] or [{}]
        pytest.fail(f"the TAS gang was not placed: its Workload's status {workload.get('status')}")
    assert blocks(placed) == {"leaf1"}, placed
    assert placed == ["kq00", "kq01"]  # 4 free GPUs on each: one member per node

    # and it was Kueue's topology assignment that put them there, not luck: the Workload's admission names the
    # nodes, and each pod carries the node selector the ungater gave it when it lifted the scheduling gate
    [workload] = cluster.custom.list_namespaced_custom_object(*KUEUE, NS, "workloads")["items"]
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {GPU: FLAVOR}
    # (Kueue records only the lowest level when it is the hostname: the nodes themselves)
    assert assignment["topologyAssignment"]["levels"] == [HOSTNAME]
    assert assigned_nodes(assignment["topologyAssignment"]) == ["kq00", "kq01"], assignment
    pods = cluster.core.list_namespaced_pod(NS, label_selector="job-name=tas").items
    assert sorted(p.spec.node_selector[HOSTNAME] for p in pods) == ["kq00", "kq01"]
    assert all(not p.spec.scheduling_gates for p in pods)
