"""Governance on the real kube-apiserver: team namespaces, GPU ResourceQuotas enforced by the
ResourceQuota admission plugin with kube-controller-manager keeping their status, Volcano Queues, and
Kueue queues once its CRDs exist. Written with the portal's own RBAC role, as the portal would."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.governance_apply import apply_kubernetes
from scheduling.collectors.k8s_governance import KUEUE_GROUP, KUEUE_VERSION, KubernetesGovernance
from scheduling.engine.governance_state import (
    Action,
    GovernanceInput,
    GovGrant,
    GovOrchestrator,
    GovQueue,
    GovTeam,
    desired_state,
    diff,
)
from scheduling.engine.types import OrchestratorKind

from .conftest import seed, wait_for

pytestmark = pytest.mark.live

# Not the fixture's own queue names (research, prod): those are hand-made here and must stay untouched.
TEAMS = (GovTeam("nlp", None, (), ("nlp-train", "nlp-serve")), GovTeam("serving", None, (), ("serving",)))
K8S = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES)


def governance(grants: tuple[GovGrant, ...] = ()) -> GovernanceInput:
    return GovernanceInput(TEAMS, (GovQueue("nlp", 40, 2, 4), GovQueue("serving", 60, 8, 16)), grants)


def observed(gov: KubernetesGovernance) -> list:
    return [*gov.read_namespaces(), *gov.read_quotas(), *gov.read_volcano_queues(), *gov.read_priority_classes()]


def apply(gov: KubernetesGovernance, data: GovernanceInput, orch: GovOrchestrator = K8S):
    desired = desired_state(data, [orch], 0.0)[orch.name]
    results = apply_kubernetes(diff(desired, observed(gov)).changes, gov)
    assert [r for r in results if r.error] == []
    return desired, results


def gpu_pod(name: str, gpus: int) -> dict:
    """A pod no scheduler picks up (the quota counts it all the same), so the fleet's nodes stay as seeded."""
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/sleep:1", "resources": resources}
    return {
        "metadata": {"name": name},
        "spec": {"schedulerName": "gpuportal-test-unscheduled", "containers": [container]},
    }


def quota_synced(gov: KubernetesGovernance, namespace: str, hard: int) -> bool:
    status = gov.quota_status(namespace, "gpuportal-gpu")
    return status is not None and status[0] == hard


@pytest.fixture(scope="module")
def gov(cluster):
    governance_client = KubernetesGovernance(cluster.portal)
    yield governance_client
    for queue in ("nlp", "serving"):
        governance_client.remove_volcano_queue(queue)
    for team in TEAMS:
        for ns in team.namespaces:
            cluster.core.delete_namespace(ns)


def test_a_pod_beyond_its_namespaces_gpu_quota_is_refused_by_the_apiserver(cluster, gov):
    apply(gov, governance())
    wait_for(lambda: quota_synced(gov, "nlp-train", 4), what="kube-controller-manager to sync the quota")
    cluster.core.create_namespaced_pod("nlp-train", gpu_pod("fits", 4))
    with pytest.raises(ApiException) as refused:
        cluster.core.create_namespaced_pod("nlp-train", gpu_pod("one-too-many", 1))
    assert refused.value.status == 403 and "exceeded quota: gpuportal-gpu" in refused.value.body
    wait_for(lambda: gov.quota_status("nlp-train", "gpuportal-gpu") == (4, 4), what="status.used to count the pod")


def test_a_grant_raises_the_quota_so_the_refused_pod_is_admitted(cluster, gov):
    apply(gov, governance((GovGrant("nlp", 2, starts_at=-1.0, ends_at=1.0),)))
    wait_for(lambda: quota_synced(gov, "nlp-train", 6), what="the raised quota to sync")
    cluster.core.create_namespaced_pod("nlp-train", gpu_pod("granted", 2))
    assert gov.quota_status("nlp-train", "gpuportal-gpu") is not None


def test_volcano_queues_carry_the_weights_capability_and_guarantee(cluster, gov):
    apply(gov, governance())
    queues = {
        q["metadata"]["name"]: q["spec"]
        for q in cluster.custom.list_cluster_custom_object(seed.VOLCANO_GROUP, seed.VOLCANO_VERSION, "queues")["items"]
    }
    assert queues["nlp"] == {
        "weight": 4000,
        "capability": {"nvidia.com/gpu": "4"},
        "guarantee": {"resource": {"nvidia.com/gpu": "2"}},
        "reclaimable": True,
    }
    assert queues["serving"]["weight"] == 6000 and queues["serving"]["capability"] == {"nvidia.com/gpu": "16"}
    # The fixture's hand-made queue is neither desired nor ever applied: unmanaged, and left as it was.
    assert queues["research"]["capability"] == {"cpu": "800", "nvidia.com/gpu": 32}
    assert "volcano_queue:research" in diff(desired_state(governance(), [K8S], 0.0)["k8s"], observed(gov)).unmanaged


def test_governance_creates_the_priority_classes_the_webhook_sets_with_the_portals_role(cluster, gov):
    apply(gov, governance())
    classes = {p.metadata.name: p.value for p in k8s.SchedulingV1Api(cluster.admin).list_priority_class().items}
    assert classes["gpuportal-batch"] == 1000 and classes["gpuportal-serving"] == 2000


def test_applying_the_same_state_again_writes_nothing(gov):
    apply(gov, governance())
    desired, results = apply(gov, governance())
    assert results == []
    assert {c.action for c in diff(desired, observed(gov)).changes} == {Action.UNCHANGED}


def test_a_hand_edit_of_a_resource_quota_is_drift_and_reapplying_reverts_it(cluster, gov):
    desired, _ = apply(gov, governance())
    cluster.core.patch_namespaced_resource_quota(
        "gpuportal-gpu", "serving", {"spec": {"hard": {"requests.nvidia.com/gpu": "99"}}}
    )
    (drift,) = diff(desired, observed(gov), desired.objects).drifts
    assert drift.id == "k8s_resource_quota:serving/gpuportal-gpu"
    assert [(f.field, f.before, f.after) for f in drift.fields] == [("gpus", 16, 99)]
    apply(gov, governance())
    assert cluster.core.read_namespaced_resource_quota("gpuportal-gpu", "serving").spec.hard == {
        "requests.nvidia.com/gpu": "16"
    }


def test_kueue_queues_are_written_only_once_its_crds_are_installed(cluster, gov):
    assert gov.kueue_installed() is False
    extensions = k8s.ApiextensionsV1Api(cluster.admin)
    crds = [
        seed.crd("ClusterQueue", "clusterqueues", "Cluster", "cq", KUEUE_GROUP, KUEUE_VERSION),
        seed.crd("LocalQueue", "localqueues", "Namespaced", "lq", KUEUE_GROUP, KUEUE_VERSION),
    ]
    for body in crds:
        extensions.create_custom_resource_definition(body)
    try:
        wait_for(gov.kueue_installed, what="the Kueue CRDs to be served")
        with_kueue = GovOrchestrator("k8s", OrchestratorKind.KUBERNETES, kueue=True)
        apply(gov, governance(), with_kueue)
        cluster_queues = {q.name: q for q in gov.read_kueue_cluster_queues()}
        assert (cluster_queues["nlp"].nominal_gpus, cluster_queues["nlp"].borrowing_limit_gpus) == (2, 2)
        assert {(q.namespace, q.cluster_queue) for q in gov.read_kueue_local_queues()} == {
            ("nlp-train", "nlp"),
            ("nlp-serve", "nlp"),
            ("serving", "serving"),
        }
    finally:
        for body in crds:
            extensions.delete_custom_resource_definition(body["metadata"]["name"])
