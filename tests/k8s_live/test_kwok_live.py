"""Hundreds of KWOK nodes and real pod lifecycles: the portal's collector against what KWOK (playing the
kubelets, scripts/k8s/kwok-stages.yaml) and the real kube-scheduler make of them.

The module adds its own fleet (200 x 8-GPU nodes under their own spine) and namespace for its tests and
removes both at the end, so the seeded fleet the other modules count is as it was.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.k8s import KubernetesCollector
from scheduling.collectors.snapshot import WorkloadState

from .conftest import GPU, effective_gpus, seed, wait_for

pytestmark = pytest.mark.live

FLEET = 200
SPINE = "spine-kwok"
NAMESPACE = "scale"


def names() -> list[str]:
    return [f"kw{i:04d}" for i in range(FLEET)]


@pytest.fixture(scope="module")
def fleet(cluster) -> Iterator[list[str]]:
    core = cluster.core
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    bodies = [seed.node_body(name, f"kwleaf{i // 32}", spine=SPINE) for i, name in enumerate(names())]
    try:
        seed.register_nodes(core, bodies, timeout=300)
        yield names()
    finally:
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        core.delete_namespace(NAMESPACE)
        for name in names():
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        wait_for(
            lambda: not any(n.metadata.name.startswith("kw") for n in core.list_node().items),
            timeout=120,
            what="the KWOK fleet to be gone",
        )
        wait_for(
            lambda: NAMESPACE not in {n.metadata.name for n in core.list_namespace().items},
            timeout=120,
            what=f"namespace {NAMESPACE} to be gone",
        )


def scale_pod(name: str, gpus: int, **annotations: str) -> dict:
    body = seed.pod_body(seed.Pod(NAMESPACE, name, gpus))
    body["metadata"]["annotations"].update(annotations)
    # Only this module's nodes: the seeded fleet's free GPUs stay as the other modules expect them.
    body["spec"]["nodeSelector"] = {"network.topology.kubernetes.io/spine": SPINE}
    return body


def phase(core: k8s.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, NAMESPACE).status.phase)


def test_kwok_reports_every_node_ready_with_the_gpus_and_topology_it_was_given(cluster, fleet):
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items if n.metadata.name in set(fleet)}
    assert len(nodes) == FLEET
    for node in nodes.values():
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True"
        assert node.status.node_info.kubelet_version.startswith("kwok-"), "KWOK, not the seed, reported it"
        assert node.status.allocatable[GPU] == "8"
        assert not any(t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or ())
    snapshot = KubernetesCollector(cluster.portal, name="k8s-live").collect()
    seen = {n.name: n for n in snapshot.nodes if n.spine == SPINE}
    assert set(seen) == set(fleet)
    assert sum(n.gpu_total for n in seen.values()) == 8 * FLEET
    assert {n.leaf_switch for n in seen.values()} == {f"kwleaf{i}" for i in range((FLEET + 31) // 32)}
    assert all(n.schedulable and n.gpu_allocated == 0 for n in seen.values())


def test_pods_the_scheduler_binds_run_and_the_collector_counts_them_until_they_finish(cluster, fleet):
    core = cluster.core
    running = [f"train-{i:03d}" for i in range(60)]  # 60 x 8 GPUs: run until deleted
    finishing = [f"sweep-{i:03d}" for i in range(40)]  # 40 x 4 GPUs: KWOK finishes them after 2 s
    for name in running:
        core.create_namespaced_pod(NAMESPACE, scale_pod(name, 8))
    for name in finishing:
        core.create_namespaced_pod(NAMESPACE, scale_pod(name, 4, **{seed.RUNTIME_ANNOTATION: "2s"}))
    wait_for(lambda: all(phase(core, n) == "Running" for n in running), timeout=180, what="the 8-GPU pods to run")
    wait_for(lambda: all(phase(core, n) == "Succeeded" for n in finishing), timeout=180, what="the sweep to finish")

    pods = {p.metadata.name: p for p in core.list_namespaced_pod(NAMESPACE).items}
    assert all(pods[n].status.pod_ip and pods[n].status.container_statuses[0].state.running for n in running)
    assert all(pods[n].status.container_statuses[0].state.terminated.exit_code == 0 for n in finishing)
    held: dict[str, int] = {}
    for name in running:
        held[pods[name].spec.node_name] = held.get(pods[name].spec.node_name, 0) + effective_gpus(pods[name])

    snapshot = KubernetesCollector(cluster.portal, name="k8s-live").collect()
    allocated = {n.name: n.gpu_allocated for n in snapshot.nodes if n.spine == SPINE and n.gpu_allocated}
    assert allocated == held and sum(allocated.values()) == 60 * 8
    mine = {w.name: w for w in snapshot.workloads if w.team == NAMESPACE}
    assert set(mine) == set(running), "finished pods hold nothing and are no workloads"
    assert all(w.state == WorkloadState.RUNNING and w.gpus == 8.0 for w in mine.values())
    for name in running:
        core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def test_a_pod_whose_container_fails_is_failed_and_frees_its_gpus(cluster, fleet):
    core = cluster.core
    core.create_namespaced_pod(NAMESPACE, scale_pod("crashes", 8, **{"gpuportal.io/fail-after": "1s"}))
    wait_for(lambda: phase(core, "crashes") == "Failed", timeout=120, what="the pod to fail")
    pod = core.read_namespaced_pod("crashes", NAMESPACE)
    assert pod.spec.node_name and pod.status.container_statuses[0].state.terminated.exit_code == 1
    snapshot = KubernetesCollector(cluster.portal, name="k8s-live").collect()
    assert snapshot.node(pod.spec.node_name).gpu_allocated == 0
    assert not any(w.name == "crashes" for w in snapshot.workloads)


def test_a_deleted_pod_is_terminating_with_its_gpus_until_its_grace_period_ends(cluster, fleet):
    core = cluster.core
    core.create_namespaced_pod(NAMESPACE, scale_pod("leaving", 8))
    wait_for(lambda: phase(core, "leaving") == "Running", timeout=120, what="the pod to run")
    node = core.read_namespaced_pod("leaving", NAMESPACE).spec.node_name
    core.delete_namespaced_pod("leaving", NAMESPACE, grace_period_seconds=5)
    collector = KubernetesCollector(cluster.portal, name="k8s-live")
    assert core.read_namespaced_pod("leaving", NAMESPACE).metadata.deletion_timestamp
    assert collector.collect().node(node).gpu_allocated == 8
    wait_for(
        lambda: "leaving" not in {p.metadata.name for p in core.list_namespaced_pod(NAMESPACE).items},
        timeout=60,
        what="KWOK to remove the pod once its grace period ended",
    )
    assert collector.collect().node(node).gpu_allocated == 0
