"""Least privilege: every verb deploy/k8s/rbac.yaml grants is used by a named call in scheduling/collectors,
and every Kubernetes API call there is granted. A new call without a rule, or a rule nothing calls, fails.
"""

import re
from pathlib import Path

import pytest

from tests.deploy.k8s_manifests import documents, find, kustomization

REPO = Path(__file__).resolve().parents[2]
COLLECTORS = REPO / "scheduling" / "collectors"

# (apiGroup, resource, verb) -> the call sites that need it: (file in scheduling/collectors, exact text).
# Custom objects go through KubernetesGovernance._ensure_custom/_remove_custom (read, then create or patch;
# delete), so a queue's get/create/patch names both the helper's call and the queue's use of it.
ENSURE_CUSTOM = [
    ("k8s_governance.py", "self.custom.get_cluster_custom_object, *plural, name"),
    ("k8s_governance.py", "self.custom.create_cluster_custom_object"),
    ("k8s_governance.py", "self.custom.patch_cluster_custom_object"),
]
USES: dict[tuple[str, str, str], list[tuple[str, str]]] = {
    ("", "nodes", "list"): [("k8s.py", 'self.list_all("nodes", self.core.list_node')],
    # The watch process (k8s_watch.py): each watched list is listed and then watched through the same call.
    ("", "nodes", "watch"): [("k8s_watch.py", 'Resource("nodes", source.core.list_node')],
    ("", "pods", "watch"): [("k8s_watch.py", "source.core.list_pod_for_all_namespaces")],
    ("scheduling.volcano.sh", "queues", "watch"): [("k8s_watch.py", 'Resource("queues", custom, (*VOLCANO, "queues")')],
    ("scheduling.volcano.sh", "podgroups", "watch"): [
        ("k8s_watch.py", 'Resource("podgroups", custom, (*VOLCANO, "podgroups")')
    ],
    ("", "nodes", "get"): [
        ("actuators.py", "self.core.read_node(node"),
        ("verbs.py", "CoreV1Api(self.api).read_node(node)"),
    ],
    ("", "nodes", "patch"): [("actuators.py", "self.core.patch_node(node, patch)")],
    ("", "pods", "list"): [
        ("k8s.py", "self.core.list_pod_for_all_namespaces"),
        ("verbs.py", 'CoreV1Api(self.api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")'),
        ("reclaim_actuators.py", "self.core.list_namespaced_pod(namespace)"),
    ],
    ("", "pods", "get"): [
        ("reclaim_actuators.py", "self.core.read_namespaced_pod(pod, namespace)"),
        ("job_control.py", "self.core.read_namespaced_pod(name, namespace)"),
    ],
    ("", "pods/eviction", "create"): [
        ("reclaim_actuators.py", "self.core.create_namespaced_pod_eviction(pod, namespace, body"),
        ("k8s_admission.py", "self.core.create_namespaced_pod_eviction"),
    ],
    ("", "pods", "patch"): [("k8s_admission.py", "self.core.patch_namespaced_pod")],
    ("", "namespaces", "list"): [
        ("k8s_governance.py", "self.core.list_namespace, label_selector=TEAM_LABEL"),
        ("k8s.py", 'self.list_all("namespaces", self.core.list_namespace'),
    ],
    ("", "namespaces", "get"): [("k8s_governance.py", "self.core.read_namespace, ns.name")],
    ("", "namespaces", "create"): [("k8s_governance.py", "self.core.create_namespace, body")],
    ("", "namespaces", "patch"): [("k8s_governance.py", "self.core.patch_namespace, ns.name")],
    ("", "resourcequotas", "list"): [("k8s_governance.py", "self.core.list_resource_quota_for_all_namespaces")],
    ("", "resourcequotas", "get"): [("k8s_governance.py", "self.core.read_namespaced_resource_quota")],
    ("", "resourcequotas", "create"): [("k8s_governance.py", "self.core.create_namespaced_resource_quota")],
    ("", "resourcequotas", "patch"): [("k8s_governance.py", "self.core.patch_namespaced_resource_quota")],
    ("", "resourcequotas", "delete"): [("k8s_governance.py", "self.core.delete_namespaced_resource_quota")],
    ("scheduling.k8s.io", "priorityclasses", "list"): [("k8s_governance.py", "self.scheduling.list_priority_class")],
    ("scheduling.k8s.io", "priorityclasses", "get"): [("k8s_governance.py", "self.scheduling.read_priority_class")],
    ("scheduling.k8s.io", "priorityclasses", "create"): [
        ("k8s_governance.py", "self.scheduling.create_priority_class")
    ],
    ("scheduling.k8s.io", "priorityclasses", "patch"): [("k8s_governance.py", "self.scheduling.patch_priority_class")],
    ("scheduling.k8s.io", "priorityclasses", "delete"): [
        ("k8s_governance.py", "self.scheduling.delete_priority_class")
    ],
    ("scheduling.volcano.sh", "queues", "list"): [
        ("k8s.py", 'self.list_all("queues", custom, *VOLCANO, "queues"'),
        ("k8s_governance.py", "self.custom.list_cluster_custom_object, *VOLCANO"),
    ],
    **{
        ("scheduling.volcano.sh", "queues", verb): [
            *ENSURE_CUSTOM,
            ("k8s_governance.py", "self._ensure_custom(VOLCANO"),
        ]
        for verb in ("get", "create", "patch")
    },
    ("scheduling.volcano.sh", "queues", "delete"): [
        ("k8s_governance.py", "self.custom.delete_cluster_custom_object(*plural, name)"),
        ("k8s_governance.py", "self._remove_custom(VOLCANO, name)"),
    ],
    ("scheduling.volcano.sh", "podgroups", "list"): [
        ("k8s.py", 'self.list_all("podgroups", custom, *VOLCANO, "podgroups"')
    ],
    ("kueue.x-k8s.io", "clusterqueues", "list"): [
        ("k8s_governance.py", 'self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"')
    ],
    **{
        ("kueue.x-k8s.io", "clusterqueues", verb): [
            *ENSURE_CUSTOM,
            ("k8s_governance.py", 'plural = (KUEUE_GROUP, KUEUE_VERSION, "clusterqueues")'),
        ]
        for verb in ("get", "create", "patch")
    },
    ("kueue.x-k8s.io", "clusterqueues", "delete"): [
        ("k8s_governance.py", 'self._remove_custom((KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"), name)')
    ],
    ("kueue.x-k8s.io", "localqueues", "list"): [
        ("k8s_governance.py", 'self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "localqueues"')
    ],
    ("kueue.x-k8s.io", "localqueues", "get"): [
        ("k8s_governance.py", "self.custom.get_namespaced_custom_object, *args")
    ],
    ("kueue.x-k8s.io", "localqueues", "create"): [("k8s_governance.py", "self.custom.create_namespaced_custom_object")],
    ("kueue.x-k8s.io", "localqueues", "patch"): [("k8s_governance.py", "self.custom.patch_namespaced_custom_object")],
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get"): [
        ("k8s.py", "self.registrations.read_mutating_webhook_configuration"),
        ("k8s.py", 'ADMISSION_WEBHOOK = "gpuportal-admission"'),
    ],
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"): [
        ("k8s_governance.py", "self.extensions.read_custom_resource_definition(name)"),
        ("k8s_governance.py", 'KUEUE_CRDS = (f"clusterqueues.{KUEUE_GROUP}", f"localqueues.{KUEUE_GROUP}")'),
    ],
}
# Every Kubernetes client method the collectors call, and the (group, resource, verb) grants it needs.
CLIENT_CALL = re.compile(r"(?:self\.(?:core|batch|custom|extensions|registrations)|k8s\.CoreV1Api\(self\.api\))\.(\w+)")


def granted() -> set[tuple[str, str, str]]:
    rules = find("ClusterRole", "gpuportal-worker")["rules"]
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def source(name: str) -> str:
    return (COLLECTORS / name).read_text()


@pytest.mark.parametrize("grant", sorted(granted()), ids="/".join)
def test_every_granted_verb_has_a_named_call_site(grant):
    sites = USES.get(grant)
    assert sites, f"{grant} is granted but no collector or actuator call is known to need it: drop the rule"
    for file, text in sites:
        assert text in source(file), f"{grant}: the call `{text}` is no longer in scheduling/collectors/{file}"


def test_every_call_site_listed_is_granted():
    assert set(USES) <= granted(), f"needed but not granted: {sorted(set(USES) - granted())}"


def test_every_kubernetes_client_call_in_the_collectors_is_listed():
    listed = "\n".join(text for sites in USES.values() for _, text in sites)
    for path in sorted(COLLECTORS.glob("*.py")):
        for method in set(CLIENT_CALL.findall(path.read_text())):
            assert method in listed, (
                f"{path.name} calls {method} but no RBAC rule lists it (tests/deploy/{Path(__file__).name})"
            )


def test_the_webhook_registration_read_is_limited_to_the_portals_own():
    rules = find("ClusterRole", "gpuportal-worker")["rules"]
    (rule,) = [r for r in rules if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert rule["resourceNames"] == ["gpuportal-admission"]


def test_crd_reads_are_limited_to_kueues_two_crds():
    (rule,) = [
        r for r in find("ClusterRole", "gpuportal-worker")["rules"] if r["apiGroups"] == ["apiextensions.k8s.io"]
    ]
    assert rule["resourceNames"] == ["clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"]


def test_only_the_worker_gets_a_kubernetes_token():
    bound = find("ClusterRoleBinding", "gpuportal-worker")["subjects"]
    assert bound == [{"kind": "ServiceAccount", "name": "gpuportal-worker", "namespace": "gpuportal"}]
    assert find("ServiceAccount", "gpuportal").get("automountServiceAccountToken") is False
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["serviceAccountName"]
        for d in documents()
        if d["kind"] in ("Deployment", "Job")
    }
    workers = {"gpuportal-worker", "gpuportal-collector"}  # the collector scrapes the same orchestrators
    assert {name for name, account in pods.items() if account == "gpuportal-worker"} == workers


def test_the_kustomization_lists_every_manifest_but_the_secret_example():
    files = {p.name for p in (REPO / "deploy" / "k8s").glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert set(kustomization()["resources"]) == files
