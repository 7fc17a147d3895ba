"""Pods created through the real kube-apiserver map to portal users: by their ``gpuportal.io/user`` label, else
by an admin's override of their service account, else of their namespace (docs/identity.md)."""

from __future__ import annotations

import pytest

from scheduling.collectors.k8s import KubernetesCollector
from scheduling.models import IdentityOverride, Orchestrator, Workload
from scheduling.selectors.workloads import active_workloads
from scheduling.services.ingest import ingest_snapshot

from .conftest import wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db]

NAMESPACE = "owners-live"  # no other live test's


def gpu_pod(name: str, *, labels: dict | None = None, service_account: str = "") -> dict:
    """A 1-GPU pod no scheduler picks up (it stays pending), so the fleet's nodes stay as seeded."""
    resources = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/sleep:1", "resources": resources}
    spec = {"schedulerName": "gpuportal-test-unscheduled", "containers": [container]}
    if service_account:
        spec["serviceAccountName"] = service_account
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


@pytest.fixture(scope="module")
def pods(cluster):
    core = cluster.core
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "trainer"}})
    core.create_namespaced_pod(NAMESPACE, gpu_pod("labelled", labels={"gpuportal.io/user": "alice"}))
    core.create_namespaced_pod(NAMESPACE, gpu_pod("by-account", service_account="trainer"))
    core.create_namespaced_pod(NAMESPACE, gpu_pod("by-namespace"))
    yield
    core.delete_namespace(NAMESPACE)


def test_pods_map_by_label_then_service_account_then_namespace(cluster, pods, django_user_model):
    alice, bob, carol = (django_user_model.objects.create_user(name) for name in ("alice", "bob", "carol"))
    k8s = Orchestrator.objects.create(name="k8s-live", kind="kubernetes", endpoint="https://127.0.0.1")
    IdentityOverride.objects.create(user=bob, orchestrator=k8s, kind="kubernetes_service_account",
                                    name=f"{NAMESPACE}/trainer")
    IdentityOverride.objects.create(user=carol, kind="kubernetes_namespace", name=NAMESPACE)
    collector = KubernetesCollector(cluster.portal, name="k8s-live")

    def mine_listed():
        snapshot = collector.collect()
        return snapshot if f"{NAMESPACE}/pod/by-namespace" in {w.external_id for w in snapshot.workloads} else None

    ingest_snapshot(k8s, wait_for(mine_listed, what="the three pods to be listed"))
    owners = {
        w.name: (w.user, w.cluster_user)
        for w in Workload.objects.filter(orchestrator=k8s, external_id__startswith=f"{NAMESPACE}/")
    }
    assert owners == {
        "labelled": ("alice", "alice"),
        "by-account": ("bob", f"{NAMESPACE}/trainer"),
        "by-namespace": ("carol", NAMESPACE),  # the fixture runs no ServiceAccount admission: no "default"
    }
    for user, pod in ((alice, "labelled"), (bob, "by-account"), (carol, "by-namespace")):
        # The seeded pods carry the older "user" label (alice, bob, ...): only this namespace's are compared.
        assert [w.name for w in active_workloads(user, search=f"{NAMESPACE}/")] == [pod]
