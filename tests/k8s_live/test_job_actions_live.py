"""Act on my jobs (issue 33 item 14) on the real kube-apiserver, through the portal's own RBAC role (the worker's
least privilege, scripts/k8s/seed.py, which has no ``pods delete``): cancel evicts a job's pod, and every pod of a
gang, through the Eviction API; a retried cancel finds nothing to do; a PodDisruptionBudget that allows no
disruption refuses it and the cancel fails saying so. The pods ask for 64 GPUs, more than any node has, so they
stay unbound and an eviction is final without a kubelet."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client import PolicyV1Api
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.errors import SourceUnavailable
from scheduling.collectors.job_control import KubernetesJobControl
from scheduling.collectors.k8s_wire import GROUP_ANNOTATION

from .conftest import seed, wait_for

pytestmark = pytest.mark.live

NS = "notify-jobs"


def _pod(name: str, group: str = "") -> dict:
    body = {"metadata": {"name": name}, "spec": seed.pod_body(seed.Pod(NS, name, 64, user="alice"))["spec"]}
    if group:
        body["metadata"]["annotations"] = {GROUP_ANNOTATION: group}
    return body


def _gone(core: k8s.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, NS)
    except ApiException as exc:
        return exc.status == 404
    return False


@pytest.fixture
def namespace(cluster):
    cluster.core.create_namespace({"metadata": {"name": NS}})
    yield cluster
    cluster.core.delete_namespace(NS)
    wait_for(lambda: _namespace_gone(cluster.core), timeout=60, what=f"namespace {NS} to be deleted")


def _namespace_gone(core: k8s.CoreV1Api) -> bool:
    try:
        core.read_namespace(NS)
    except ApiException as exc:
        return exc.status == 404
    return False


def test_cancel_evicts_a_pod_and_a_gangs_pods_through_the_portals_role(namespace):
    core = namespace.core
    control = KubernetesJobControl(namespace.portal, dry_run=False)

    core.create_namespaced_pod(NS, _pod("lonely"))
    result = control.cancel(f"{NS}/pod/lonely")
    assert result.changed and result.command_or_request == f"POST /api/v1/namespaces/{NS}/pods/lonely/eviction"
    wait_for(lambda: _gone(core, "lonely"), what="the cancelled pod to be gone")
    again = control.cancel(f"{NS}/pod/lonely")
    assert not again.changed and "no pod left" in again.message  # a retried cancel does nothing

    for index in range(2):
        core.create_namespaced_pod(NS, _pod(f"gang-{index}", group="sweep"))
    core.create_namespaced_pod(NS, _pod("bystander"))
    result = control.cancel(f"{NS}/sweep")
    assert result.changed and result.message == f"evicted 2 pods of {NS}/sweep"
    wait_for(lambda: _gone(core, "gang-0") and _gone(core, "gang-1"), what="the gang's pods to be gone")
    assert not _gone(core, "bystander")  # only the job's own pods


def test_a_disruption_budget_refuses_the_cancel_and_it_fails_saying_so(namespace):
    core = namespace.core
    guarded = _pod("guarded")
    guarded["metadata"]["labels"] = {"app": "serving"}
    core.create_namespaced_pod(NS, guarded)
    budget = {"metadata": {"name": "keep-serving"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "serving"}}}}
    PolicyV1Api(namespace.admin).create_namespaced_pod_disruption_budget(NS, budget)
    # A Pending pod is evicted whatever its budget: say what a kubelet would, that it runs.
    core.patch_namespaced_pod_status("guarded", NS, {"status": {"phase": "Running"}})
    control = KubernetesJobControl(namespace.portal, dry_run=False)
    with pytest.raises(SourceUnavailable, match="a PodDisruptionBudget refused notify-jobs/guarded") as refused:
        control.cancel(f"{NS}/pod/guarded")
    assert refused.value.status == 429 and not refused.value.retryable
    assert not _gone(core, "guarded")  # nothing was deleted
