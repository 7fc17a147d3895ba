"""KubernetesActuator against the live fixture, with the portal's own RBAC role: each verb must really
change the Node object (read back as admin), be idempotent, leave the object alone in dry-run, and
show up in the next collect. The real kube-scheduler then honours the change."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduling.collectors import KubernetesActuator, SourceUnavailable
from scheduling.collectors.k8s import KubernetesCollector

from .conftest import seed, wait_for

pytestmark = pytest.mark.live

DRAIN_KEY = "portal.example.com/drain"


@pytest.fixture
def actuator(cluster):
    return KubernetesActuator(cluster.portal, dry_run=False)


@pytest.fixture
def collector(cluster):
    return KubernetesCollector(cluster.portal, name="k8s-live")


def taints_of(cluster, node: str) -> set[tuple[str, str, str]]:
    return {(t.key, t.value or "", t.effect) for t in cluster.core.read_node(node).spec.taints or ()}


def test_cordon_and_uncordon_really_change_the_node_and_are_idempotent(cluster, actuator, collector):
    try:
        first = actuator.cordon("dgx01")
        assert first.changed and not first.dry_run
        assert cluster.core.read_node("dgx01").spec.unschedulable is True
        assert not actuator.cordon("dgx01").changed
        node = collector.collect().node("dgx01")
        assert node.cordoned and not node.schedulable

        assert actuator.uncordon("dgx01").changed
        assert not cluster.core.read_node("dgx01").spec.unschedulable
        assert not actuator.uncordon("dgx01").changed
        node = collector.collect().node("dgx01")
        assert not node.cordoned and node.schedulable
    finally:
        cluster.core.patch_node("dgx01", {"spec": {"unschedulable": None}})


def test_the_scheduler_keeps_a_new_pod_off_a_node_the_actuator_cordoned(cluster, actuator):
    pod = seed.Pod("hpo", "pinned-trial", 0)
    body = seed.pod_body(pod)
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "dgx02"}  # no GPUs: only the cordon can stop it
    try:
        assert actuator.cordon("dgx02").changed
        cluster.core.create_namespaced_pod("hpo", body)

        def refused() -> bool:
            conditions = cluster.core.read_namespaced_pod("pinned-trial", "hpo").status.conditions or []
            return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)

        wait_for(refused, what="the scheduler to refuse the cordoned node")
        assert not cluster.core.read_namespaced_pod("pinned-trial", "hpo").spec.node_name
        assert actuator.uncordon("dgx02").changed
        wait_for(lambda: seed.bound_node(cluster.core, "hpo", "pinned-trial") == "dgx02", what="binding to dgx02")
    finally:
        cluster.core.patch_node("dgx02", {"spec": {"unschedulable": None}})
        cluster.core.delete_namespaced_pod("pinned-trial", "hpo", grace_period_seconds=0)


def test_a_label_is_set_changed_and_removed_on_the_node_object(cluster, actuator, collector):
    key = "gpuportal.io/pool"
    try:
        assert actuator.label("dgx03", key, "slurm").changed
        assert cluster.core.read_node("dgx03").metadata.labels[key] == "slurm"
        assert not actuator.label("dgx03", key, "slurm").changed
        assert collector.collect().node("dgx03").labels[key] == "slurm"
        assert actuator.label("dgx03", key, "kubernetes").changed
        assert cluster.core.read_node("dgx03").metadata.labels[key] == "kubernetes"

        assert actuator.label("dgx03", key, None).changed
        labels = cluster.core.read_node("dgx03").metadata.labels
        assert key not in labels and labels["nvidia.com/gpu.product"] == seed.PRODUCT  # others untouched
        assert not actuator.label("dgx03", key, None).changed
        assert key not in collector.collect().node("dgx03").labels
    finally:
        cluster.core.patch_node("dgx03", {"metadata": {"labels": {key: None}}})


def test_a_taint_is_added_and_removed_and_the_nodes_other_taints_are_kept(cluster, actuator, collector):
    node = seed.DRAINED_NODE  # already carries the drain taint, which must survive
    before = taints_of(cluster, node)
    try:
        added = actuator.taint(node, "gpuportal.io/reserved", "llm", "NoExecute")
        assert added.changed
        assert taints_of(cluster, node) == before | {("gpuportal.io/reserved", "llm", "NoExecute")}
        assert not actuator.taint(node, "gpuportal.io/reserved", "llm", "NoExecute").changed
        observed = collector.collect().node(node)
        assert ("gpuportal.io/reserved", "llm", "NoExecute") in {(t.key, t.value, t.effect) for t in observed.taints}

        assert actuator.taint(node, "gpuportal.io/reserved", "llm", "NoExecute", remove=True).changed
        assert taints_of(cluster, node) == before
        assert not actuator.taint(node, "gpuportal.io/reserved", "llm", "NoExecute", remove=True).changed
    finally:
        kept = [t.to_dict() for t in cluster.core.read_node(node).spec.taints or () if t.key != "gpuportal.io/reserved"]
        cluster.core.patch_node(node, {"spec": {"taints": kept}})


def test_draining_a_node_like_the_portal_does_moves_it_out_of_the_schedulable_pool(cluster, actuator, collector):
    node = "dgx04"  # full: the Volcano gang keeps running on it
    try:
        assert actuator.cordon(node).changed
        assert actuator.taint(node, DRAIN_KEY, "rebalance").changed
        observed = collector.collect().node(node)
        assert observed.cordoned and not observed.schedulable and observed.gpu_allocated == 8
        assert (DRAIN_KEY, "rebalance", "NoSchedule") in taints_of(cluster, node)
    finally:
        actuator.taint(node, DRAIN_KEY, "rebalance", remove=True)
        actuator.uncordon(node)
    assert collector.collect().node(node).schedulable


def test_re_applying_a_taint_without_a_value_changes_nothing(cluster, actuator):
    node = "dgx05"
    try:
        assert actuator.taint(node, "gpuportal.io/no-new-work").changed
        version = cluster.core.read_node(node).metadata.resource_version
        again = actuator.taint(node, "gpuportal.io/no-new-work")
        assert not again.changed
        assert cluster.core.read_node(node).metadata.resource_version == version
    finally:
        cluster.core.patch_node(node, {"spec": {"taints": None}})


def test_re_applying_a_taint_that_is_not_the_last_one_changes_nothing(cluster, actuator):
    node = "dgx05"
    try:
        assert actuator.taint(node, "gpuportal.io/first", "a").changed
        assert actuator.taint(node, "gpuportal.io/second", "b").changed
        version = cluster.core.read_node(node).metadata.resource_version
        assert not actuator.taint(node, "gpuportal.io/first", "a").changed
        assert cluster.core.read_node(node).metadata.resource_version == version
    finally:
        cluster.core.patch_node(node, {"spec": {"taints": None}})


def test_dry_run_verbs_change_nothing_on_the_node(cluster):
    dry = KubernetesActuator(cluster.portal)  # dry-run is the default
    version = cluster.core.read_node("dgx02").metadata.resource_version
    results = [
        dry.cordon("dgx02"),
        dry.uncordon("dgx02"),
        dry.label("dgx02", "gpuportal.io/pool", "ray"),
        dry.taint("dgx02", DRAIN_KEY, "maybe"),
        dry.taint("dgx02", DRAIN_KEY, "maybe", remove=True),
    ]
    assert all(r.dry_run and not r.changed for r in results)
    assert results[0].command_or_request == 'PATCH /api/v1/nodes/dgx02 {"spec": {"unschedulable": true}}'
    assert cluster.core.read_node("dgx02").metadata.resource_version == version


def test_acting_on_a_node_that_does_not_exist_is_a_source_unavailable_error(actuator):
    with pytest.raises(SourceUnavailable) as error:
        actuator.cordon("dgx99")
    assert error.value.status == 404 and not error.value.retryable


def test_the_portals_role_may_read_and_patch_nodes_but_not_delete_pods(cluster):
    core = k8s.CoreV1Api(cluster.portal)
    assert len(core.list_node().items) == 6
    with pytest.raises(ApiException) as error:
        core.delete_namespaced_pod("finetune", "llm")
    assert error.value.status == 403
    assert cluster.core.read_namespaced_pod("finetune", "llm").spec.node_name
