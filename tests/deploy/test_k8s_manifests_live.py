"""deploy/k8s against the project's real kube-apiserver (tests/k8s_live/conftest.py): every object of the
kustomization is sent with server-side dry-run (``dryRun=All``), so the API server runs its defaulting,
validation and admission on it and stores nothing. Only the namespace is created for real (namespaced
objects need it to exist, even in a dry run) and deleted afterwards."""

import pytest
from kubernetes import client as k8s
from kubernetes.dynamic import DynamicClient

from tests.deploy.k8s_manifests import documents

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def api(cluster):  # module: a deleted namespace lingers while it finalises
    dynamic = DynamicClient(cluster.admin)
    core = k8s.CoreV1Api(cluster.admin)
    (namespace,) = [doc for doc in documents() if doc["kind"] == "Namespace"]
    core.create_namespace(namespace)
    try:
        yield dynamic
    finally:
        core.delete_namespace(namespace["metadata"]["name"])


def dry_run(api: DynamicClient, doc: dict) -> dict:
    resource = api.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    namespace = doc["metadata"].get("namespace") if resource.namespaced else None
    return api.create(resource, body=doc, namespace=namespace, dry_run="All").to_dict()


def test_every_manifest_passes_server_side_dry_run(api):
    objects = [doc for doc in documents() if doc["kind"] != "Namespace"]
    kinds = {doc["kind"] for doc in objects}
    assert {"Deployment", "Job", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    assert {"NetworkPolicy", "ConfigMap", "MutatingWebhookConfiguration"} <= kinds
    for doc in objects:
        stored = dry_run(api, doc)
        assert stored["metadata"]["name"] == doc["metadata"]["name"], doc["kind"]
        assert "uid" in stored["metadata"]  # the server's own answer, defaulted, not an echo


def test_the_server_rejects_an_invalid_manifest(api):
    """The dry run is a real check: the API server refuses what it would refuse for real."""
    (web,) = [d for d in documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpuportal-web"]
    broken = {**web, "spec": {**web["spec"], "selector": {"matchLabels": {"app.kubernetes.io/name": "other"}}}}
    with pytest.raises(Exception, match="selector"):
        dry_run(api, broken)


def test_the_dry_run_stores_nothing(api):
    for doc in documents():
        if doc["kind"] == "Deployment":
            dry_run(api, doc)
    apps = k8s.AppsV1Api(api.client)
    assert apps.list_namespaced_deployment("gpuportal").items == []
