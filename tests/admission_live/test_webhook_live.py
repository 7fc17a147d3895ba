"""Pods created through a real kube-apiserver pass through the portal's mutating webhook (over TLS)."""

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from scheduling.models import AdmissionDecision, Orchestrator, Team
from scheduling.services.collection import scrape

pytestmark = pytest.mark.django_db(transaction=True)

DECISION = "scheduler.gpuportal.io/decision"


@pytest.fixture(scope="module")
def namespaces(cluster):
    for name in ("nlp", "broke", "nowhere"):
        cluster.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    scheduling = k8s.SchedulingV1Api(cluster.admin)
    for name, value in (("gpuportal-batch", 1000), ("gpuportal-serving", 2000)):
        scheduling.create_priority_class(k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value))
    return cluster


@pytest.fixture
def governed(queues, namespaces):
    Team.objects.create(slug="broke", name="Broke")  # a team with no GPU quota at all
    return Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://127.0.0.1:25443",
                                       options={"kubeconfig": namespaces.kubeconfig})


def gpu_pod(name: str, gpus: int = 2) -> k8s.V1Pod:
    resources = k8s.V1ResourceRequirements(limits={"nvidia.com/gpu": str(gpus)})
    container = k8s.V1Container(name="c", image="registry.invalid/train:1", resources=resources)
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1PodSpec(containers=[container]))


def test_a_pod_in_a_team_namespace_comes_back_routed_to_volcano_on_the_pool(namespaces, webhook, governed):
    pod = namespaces.core.create_namespaced_pod("nlp", gpu_pod("train-1"))
    assert pod.spec.scheduler_name == "volcano"
    assert pod.spec.node_selector == {"gpuportal.io/pool": "k8s-a"}
    assert pod.spec.priority_class_name == "gpuportal-batch"
    assert any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.spec.tolerations)
    assert pod.metadata.annotations[DECISION] == "volcano on k8s-a"
    assert json.loads(pod.metadata.annotations["scheduler.gpuportal.io/reasons"])
    decision = AdmissionDecision.objects.get(name="train-1")
    assert (decision.namespace, decision.team.slug, decision.allowed, decision.patched) == ("nlp", "nlp", True, True)
    assert decision.user == "fixture-admin"  # who created it, as the API server authenticated them


def test_a_team_without_gpu_quota_is_denied_with_what_to_request(namespaces, webhook, governed):
    with pytest.raises(ApiException) as denied:
        namespaces.core.create_namespaced_pod("broke", gpu_pod("greedy"))
    assert denied.value.status == 403
    assert "request quota for broke" in json.loads(denied.value.body)["message"]
    assert AdmissionDecision.objects.get(name="greedy").allowed is False
    assert namespaces.core.list_namespaced_pod("broke").items == []


def test_an_unknown_namespace_is_allowed_unchanged_with_the_reason_recorded(namespaces, webhook, governed):
    pod = namespaces.core.create_namespaced_pod("nowhere", gpu_pod("stray"))
    assert pod.spec.scheduler_name == "default-scheduler" and not pod.spec.node_selector
    assert DECISION not in (pod.metadata.annotations or {})
    decision = AdmissionDecision.objects.get(name="stray")
    assert decision.allowed and not decision.patched
    assert "maps to no team" in decision.reasons[0]


def test_with_the_webhook_down_and_ignore_pods_are_still_created_without_a_decision(namespaces, webhook, governed):
    webhook.terminate()
    pod = namespaces.core.create_namespaced_pod("nlp", gpu_pod("bypassed"))
    assert pod.metadata.uid and DECISION not in (pod.metadata.annotations or {})
    assert pod.spec.scheduler_name == "default-scheduler"
    assert not AdmissionDecision.objects.filter(name="bypassed").exists()


def test_a_pod_created_while_the_webhook_is_down_is_found_bypassed_by_the_next_collection_round(
        namespaces, webhook, governed):
    webhook.terminate()
    namespaces.core.create_namespaced_pod("nlp", gpu_pod("sneaked-in"))
    assert scrape(governed.pk).run.ok
    finding = AdmissionDecision.objects.get(name="sneaked-in")
    assert (finding.bypassed, finding.namespace, finding.team.slug, finding.pool) == (True, "nlp", "nlp", "k8s-a")
    assert finding.scheduler == "default-scheduler"  # what it asked for: the API server's default, not the portal's
    assert finding.uid == namespaces.core.read_namespaced_pod("sneaked-in", "nlp").metadata.uid
    scrape(governed.pk)
    assert AdmissionDecision.objects.filter(name="sneaked-in").count() == 1  # found once, not every round


def test_a_pod_routed_by_the_webhook_is_no_bypass_finding(namespaces, webhook, governed):
    namespaces.core.create_namespaced_pod("nlp", gpu_pod("went-through"))
    assert scrape(governed.pk).run.ok
    assert AdmissionDecision.objects.get(name="went-through").bypassed is False  # the webhook's own answer
    assert not AdmissionDecision.objects.filter(bypassed=True, namespace="nlp", name="went-through").exists()


def test_with_failure_policy_fail_a_pod_is_refused_while_the_webhook_is_down(namespaces, webhook, governed):
    registrations = k8s.AdmissionregistrationV1Api(namespaces.admin)
    webhook.terminate()
    set_failure_policy(registrations, "Fail")
    try:
        with pytest.raises(ApiException) as refused:
            namespaces.core.create_namespaced_pod("nlp", gpu_pod("must-route"))
        assert "failed calling webhook" in json.loads(refused.value.body)["message"]
        assert not any(p.metadata.name == "must-route" for p in namespaces.core.list_namespaced_pod("nlp").items)
    finally:
        set_failure_policy(registrations, "Ignore")


def set_failure_policy(registrations: k8s.AdmissionregistrationV1Api, policy: str) -> None:
    registrations.patch_mutating_webhook_configuration(
        "gpuportal-admission", [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy}])
