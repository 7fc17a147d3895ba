"""The Kubernetes workloads' promises, read from deploy/k8s: settings the portal reads, non-root pods,
no migration outside the migrate Job, probes on every long-running container."""

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.k8s_manifests import K8S, documents, find

SETTINGS = (Path(__file__).resolve().parents[2] / "gpuportal" / "settings.py").read_text()
WORKLOADS = [d for d in documents() if d["kind"] in ("Deployment", "Job")]


def pod(doc):
    return doc["spec"]["template"]["spec"]


def test_every_configured_name_is_a_setting_the_portal_reads():
    secret = yaml.safe_load((K8S / "secret.example.yaml").read_text())
    names = set(find("ConfigMap", "gpuportal-config")["data"]) | set(secret["stringData"])
    unread = {n for n in names if not re.search(rf"""["']{n}["']""", SETTINGS)}
    assert not unread, f"not read by gpuportal/settings.py: {sorted(unread)}"


@pytest.mark.parametrize("doc", WORKLOADS, ids=lambda d: d["metadata"]["name"])
def test_pods_run_as_the_images_non_root_user_on_a_read_only_root(doc):
    spec = pod(doc)
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/app/var", "/tmp"}
        assert {"configMapRef": {"name": "gpuportal-config"}} in container["envFrom"]
        assert {"secretRef": {"name": "gpuportal-secrets"}} in container["envFrom"]


@pytest.mark.parametrize("doc", WORKLOADS, ids=lambda d: d["metadata"]["name"])
def test_only_the_migrate_job_migrates_and_long_runners_are_probed(doc):
    (container,) = pod(doc)["containers"]
    if doc["kind"] == "Job":
        assert container["command"] == ["python", "manage.py", "migrate", "--noinput"]
        assert pod(doc)["restartPolicy"] == "Never"
    else:
        assert "migrate" not in " ".join(container["command"])
        assert "livenessProbe" in container


def test_beat_is_a_single_replica_never_overlapping():
    beat = find("Deployment", "gpuportal-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}


def test_the_webhook_service_reaches_the_portals_mutate_endpoint():
    (hook,) = find("MutatingWebhookConfiguration", "gpuportal-admission")["webhooks"]
    service = hook["clientConfig"]["service"]
    assert service["path"] == "/admission/v1/mutate"
    assert find("Service", service["name"])["metadata"]["namespace"] == service["namespace"]
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 2  # docs/routing.md's default


def test_the_portal_counts_the_ingress_controller_so_clients_keep_their_own_address():
    # Issue 29 item 5: unset, every user behind the Ingress shared its address for the sign-in lockout.
    assert find("ConfigMap", "gpuportal-config")["data"]["GPUPORTAL_PROXY_COUNT"] == "1"


def test_only_the_autoscaler_may_call_the_expander():
    """cluster-autoscaler presents no client certificate, so the network policy is the expander's only gate: every
    rule admitting its port names the autoscaler's pods in kube-system, never any pod of any namespace."""
    policy = find("NetworkPolicy", "gpuportal-expander-ingress")
    rules = policy["spec"]["ingress"]
    assert rules and all(rule.get("from") for rule in rules)
    for peer in (peer for rule in rules for peer in rule["from"]):
        assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "kube-system"}
        assert peer["podSelector"]["matchLabels"] == {"app": "cluster-autoscaler"}
