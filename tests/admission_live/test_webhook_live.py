"""Pods created through a real kube-apiserver pass through the portal's mutating webhook (over TLS)."""

import json
from datetime import timedelta

import pytest
from django.test.utils import override_settings
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from scheduling.collectors.governance_apply import apply_kubernetes
from scheduling.collectors.k8s_governance import KubernetesGovernance
from scheduling.engine.governance_state import GovernanceInput, GovOrchestrator, GovTeam, desired_state, diff
from scheduling.engine.types import OrchestratorKind
from scheduling.models import AdmissionDecision, Node, Orchestrator, QuotaGrant, QuotaRequest, Team, Workload
from scheduling.services.collection import scrape
from tests.k8s_live.conftest import seed

pytestmark = pytest.mark.django_db(transaction=True)

DECISION = "scheduler.gpuportal.io/decision"


# The team namespaces as governance makes them (labelled gpuportal.io/team), with the priority classes it keeps.
GOVERNED_TEAMS = (GovTeam("nlp", namespaces=("nlp", "nlp-train")), GovTeam("broke"), GovTeam("granted"))


@pytest.fixture(scope="module")
def namespaces(cluster):
    """Governance's first round on a fresh cluster: the team namespaces and the webhook's priority classes (before,
    this fixture made the classes by hand: nothing in the portal did, and every routed pod was refused)."""
    cluster.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="nowhere")))
    gov = KubernetesGovernance(cluster.admin)
    orchestrator = GovOrchestrator("k8s-a", OrchestratorKind.KUBERNETES, volcano=False)
    desired = desired_state(GovernanceInput(GOVERNED_TEAMS, ()), [orchestrator], 0.0)["k8s-a"]
    observed = [*gov.read_namespaces(), *gov.read_priority_classes()]
    assert [r.error for r in apply_kubernetes(diff(desired, observed).changes, gov) if r.error] == []
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
    Node.objects.create(orchestrator=governed, name="n0", gpu_model="H100", gpu_total=8,
                        labels={"gpuportal.io/pool": "k8s-a"})
    pod = namespaces.core.create_namespaced_pod("nlp", gpu_pod("train-1"))
    assert pod.spec.scheduler_name == "volcano"
    assert pod.spec.node_selector == {"gpuportal.io/pool": "k8s-a"}
    assert pod.spec.priority_class_name == "gpuportal-batch" and pod.spec.priority == 1000
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


def test_a_pod_outside_the_team_namespaces_is_never_sent_to_the_webhook(namespaces, webhook, governed):
    pod = namespaces.core.create_namespaced_pod("nowhere", gpu_pod("stray"))
    assert pod.spec.scheduler_name == "default-scheduler" and not pod.spec.node_selector
    assert DECISION not in (pod.metadata.annotations or {})
    assert not AdmissionDecision.objects.filter(name="stray").exists()


def test_on_a_fresh_cluster_a_routed_pod_gets_no_selector_no_node_carries(namespaces, webhook, governed):
    """Issue 30, item 4: no node carries gpuportal.io/pool until a rebalance labels some."""
    pod = namespaces.core.create_namespaced_pod("nlp", gpu_pod("fresh"))
    assert pod.spec.scheduler_name == "volcano" and pod.spec.priority_class_name == "gpuportal-batch"
    assert not pod.spec.node_selector
    reasons = json.loads(pod.metadata.annotations["scheduler.gpuportal.io/reasons"])
    assert any("no schedulable node carries gpuportal.io/pool=k8s-a" in r for r in reasons)


def test_on_a_fresh_cluster_a_routed_pod_is_bound_by_the_kube_scheduler_and_run_by_kwok(namespaces, webhook, governed):
    """Issue 30, item 4, end to end: governance made the priority classes (the `namespaces` fixture), no node carries
    a pool label (no rebalance has run), and the cluster's GPU nodes are tainted. The webhook routes an entitled
    team's serving pod and its batch pod (this cluster runs no Volcano: option volcano false); the real
    kube-scheduler binds both to KWOK GPU nodes and KWOK runs them."""
    Team.objects.filter(slug="nlp").update(serving_kinds=["inference"])
    governed.options = {**governed.options, "volcano": False}
    governed.save()
    assert scrape(governed.pk).run.ok  # the portal has seen the fresh cluster's nodes: none labelled for a pool
    seen = {node.name: node.labels for node in Node.objects.filter(orchestrator=governed)}
    assert set(namespaces.gpu_nodes) <= set(seen) and not any("gpuportal.io/pool" in labels for labels in seen.values())
    serving = gpu_pod("serve-fresh", gpus=4)
    serving.metadata.annotations = {"scheduler.gpuportal.io/kind": "inference"}
    created = {pod.metadata.name: pod for pod in (namespaces.core.create_namespaced_pod("nlp", serving),
                                                  namespaces.core.create_namespaced_pod("nlp", gpu_pod("batch-fresh")))}
    for name, (priority_class, priority) in {"serve-fresh": ("gpuportal-serving", 2000),
                                             "batch-fresh": ("gpuportal-batch", 1000)}.items():
        pod = created[name]
        assert pod.spec.scheduler_name == "default-scheduler" and not pod.spec.node_selector
        assert (pod.spec.priority_class_name, pod.spec.priority) == (priority_class, priority)
        assert pod.metadata.annotations[DECISION] == "default-scheduler on any pool"
        running = seed.wait(f"{name} bound and running", lambda name=name: running_pod(namespaces.core, "nlp", name))
        assert running.spec.node_name in namespaces.gpu_nodes and running.status.phase == "Running"
        assert any(c.type == "PodScheduled" and c.status == "True" for c in running.status.conditions)


def running_pod(core: k8s.CoreV1Api, namespace: str, name: str) -> k8s.V1Pod | None:
    pod = core.read_namespaced_pod(name, namespace)
    return pod if pod.spec.node_name and pod.status.phase == "Running" else None


def test_an_annotation_asking_for_the_serving_priority_is_lowered(namespaces, webhook, governed):
    """Issue 30, item 1: live, research/hi-prio got gpuportal-serving by annotation and preempted serving pods."""
    pod = gpu_pod("hi-prio", gpus=8)
    pod.metadata.annotations = {"scheduler.gpuportal.io/scheduler": "default"}
    created = namespaces.core.create_namespaced_pod("nlp", pod)
    assert created.spec.priority_class_name == "gpuportal-batch" and created.spec.priority == 1000
    assert created.spec.scheduler_name == "volcano"
    assert "serving priority is not granted to team nlp" in created.metadata.annotations[
        "scheduler.gpuportal.io/reasons"]


def test_a_team_whose_quota_is_an_active_grant_is_admitted(namespaces, webhook, governed, cast):
    """Issue 30, item 2: a grant-only team was denied and told to request quota, which it had done."""
    team = Team.objects.create(slug="granted", name="Granted")
    now = timezone.now()
    request = QuotaRequest.objects.create(team=team, requester=cast["researcher"], gpus=8, starts_at=now,
                                          ends_at=now + timedelta(days=1), justification="deadline",
                                          state=QuotaRequest.State.ACTIVE)
    QuotaGrant.objects.create(request=request, team=team, gpus=8, starts_at=now - timedelta(minutes=1),
                              ends_at=now + timedelta(days=1), state=QuotaGrant.State.ACTIVE)
    created = namespaces.core.create_namespaced_pod("granted", gpu_pod("granted-1"))
    assert created.spec.scheduler_name == "volcano"
    assert AdmissionDecision.objects.get(name="granted-1").allowed is True


def test_a_pod_in_a_mapped_namespace_counts_for_its_team(namespaces, webhook, governed, client, cast):
    """Issue 30, item 3: pods in the mapped nlp-train showed team None and the webhook said it maps to no team."""
    governed.options = {**governed.options, "governance": {"namespaces": {"nlp": ["nlp", "nlp-train"]}}}
    governed.save()
    namespaces.core.create_namespaced_pod("nlp-train", gpu_pod("mapped-1", gpus=4))
    assert AdmissionDecision.objects.get(name="mapped-1").team.slug == "nlp"
    assert scrape(governed.pk).run.ok
    assert Workload.objects.get(name="mapped-1").team.slug == "nlp"
    client.force_login(cast["admin"])
    with override_settings(ROOT_URLCONF="gpuportal.urls", ALLOWED_HOSTS=["testserver"]):  # the portal's own port
        rows = client.get("/api/v1/workloads/", {"team": "nlp"}).json()["results"]
    assert any(row["name"] == "mapped-1" and row["gpus"] == 4 for row in rows)


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


@pytest.mark.parametrize("action", ["label", "evict"])
def test_a_bypassed_pod_is_labelled_or_evicted_as_the_admin_chose_for_the_cluster(
        namespaces, webhook, governed, action):
    """Issue 30, item 5: per cluster, report only (the default), label for the next round, or evict with a message."""
    governed.options = {**governed.options, "admission_bypass": action}
    governed.save()
    webhook.terminate()
    namespaces.core.create_namespaced_pod("nlp", gpu_pod(f"bypass-{action}"))
    assert scrape(governed.pk).run.ok
    finding = AdmissionDecision.objects.get(name=f"bypass-{action}", bypassed=True)
    if action == "label":
        pod = namespaces.core.read_namespaced_pod("bypass-label", "nlp")
        assert pod.metadata.labels["gpuportal.io/admission-bypassed"] == "true"
        assert "set to label such pods" in pod.metadata.annotations["scheduler.gpuportal.io/bypass-action"]
        assert finding.reasons[-1] == "k8s-a: labelled gpuportal.io/admission-bypassed=true"
    else:
        assert not any(p.metadata.name == "bypass-evict" for p in namespaces.core.list_namespaced_pod("nlp").items
                       if p.metadata.deletion_timestamp is None)
        assert finding.reasons[-1] == "k8s-a: evicted"


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


def test_with_the_documented_configuration_and_the_portal_down_non_gpu_pods_are_still_created(
        namespaces, webhook, governed):
    """failurePolicy Fail, as a site enforcing routing would set it, with deploy/k8s/admission.yaml's selectors and
    matchConditions: only a team's GPU pods wait for the portal; its other pods and every other namespace's are
    created while it is down (before, every pod of a team namespace was refused)."""
    registrations = k8s.AdmissionregistrationV1Api(namespaces.admin)
    webhook.terminate()
    set_failure_policy(registrations, "Fail")
    try:
        for namespace in ("nowhere", "nlp"):
            plain = k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="web"), spec=k8s.V1PodSpec(
                containers=[k8s.V1Container(name="c", image="registry.invalid/web:1")]))
            created = namespaces.core.create_namespaced_pod(namespace, plain)
            assert created.metadata.uid and DECISION not in (created.metadata.annotations or {})
        with pytest.raises(ApiException) as refused:
            namespaces.core.create_namespaced_pod("nlp", gpu_pod("must-route-2"))
        assert "failed calling webhook" in json.loads(refused.value.body)["message"]
    finally:
        set_failure_policy(registrations, "Ignore")


def set_failure_policy(registrations: k8s.AdmissionregistrationV1Api, policy: str) -> None:
    registrations.patch_mutating_webhook_configuration(
        "gpuportal-admission", [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy}])
