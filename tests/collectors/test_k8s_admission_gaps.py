"""The collector carries what "admission bypassed" needs: the scheduler a pod asked for, and the GPU pods created
since the portal's webhook was registered that bear no decision of it."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.k8s import KubernetesCollector, build_snapshot, epoch
from scheduling.collectors.reliability import NO_RETRY

REGISTERED = "2026-12-04T10:00:00Z"
DECISION = "scheduler.gpuportal.io/decision"


def _pod(name, created, *, decided=False, scheduler="default-scheduler", node=""):
    annotations = {DECISION: "volcano on k8s-a"} if decided else {"unrelated": "x"}
    return {
        "metadata": {"name": name, "namespace": "nlp", "uid": f"uid-{name}", "creationTimestamp": created,
                     "annotations": annotations},
        "spec": {"schedulerName": scheduler, "nodeName": node,
                 "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Running" if node else "Pending"},
    }


def _workloads(pods, since):
    return {w.name: w for w in build_snapshot("k8s-a", nodes=[], pods=pods, admission_since=since).workloads}


def test_a_pod_created_after_registration_without_a_decision_is_a_gap_with_its_scheduler():
    found = _workloads([_pod("raw", "2026-12-04T10:05:00Z", scheduler="my-scheduler")], epoch(REGISTERED))
    workload = found["raw"]
    assert workload.scheduler == "my-scheduler"
    [gap] = workload.admission_gaps
    assert (gap.namespace, gap.pod, gap.uid, gap.created_at) == ("nlp", "raw", "uid-raw", epoch("2026-12-04T10:05:00Z"))


def test_decided_pods_and_pods_older_than_the_webhook_are_no_gaps():
    found = _workloads([_pod("routed", "2026-12-04T10:05:00Z", decided=True, scheduler="volcano"),
                        _pod("old", "2026-12-04T09:59:59Z"), _pod("same-second", REGISTERED)], epoch(REGISTERED))
    assert found["routed"].admission_gaps == () and found["routed"].scheduler == "volcano"
    assert found["old"].admission_gaps == ()
    assert [g.pod for g in found["same-second"].admission_gaps] == ["same-second"]


def test_without_a_registered_webhook_nothing_is_a_gap():
    assert _workloads([_pod("raw", "2026-12-04T10:05:00Z")], None)["raw"].admission_gaps == ()


def test_a_gang_lists_each_member_pod_without_a_decision():
    members = [_pod(f"m{i}", "2026-12-04T10:05:00Z", decided=i == 0) for i in range(3)]
    for pod in members:
        pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "gang"
    [gang] = build_snapshot("k8s-a", nodes=[], pods=members, admission_since=epoch(REGISTERED)).workloads
    assert sorted(g.pod for g in gang.admission_gaps) == ["m1", "m2"]


class _Registrations:
    def __init__(self, answer):
        self.answer, self.names = answer, []

    def read_mutating_webhook_configuration(self, name, **kwargs):
        self.names.append(name)
        if isinstance(self.answer, ApiException):
            raise self.answer
        return type("Response", (), {"data": self.answer, "release_conn": lambda self: None})()


@pytest.fixture
def collector():
    return KubernetesCollector(client.ApiClient(), retry=NO_RETRY)


def test_the_collector_reads_when_the_portals_webhook_was_registered(collector):
    collector.registrations = _Registrations(
        b'{"metadata": {"name": "gpuportal-admission", "creationTimestamp": "2026-12-04T10:00:00Z"}, "webhooks": []}')
    assert collector.admission_registered_since() == (epoch(REGISTERED), ())
    assert collector.registrations.names == ["gpuportal-admission"]


def test_no_registered_webhook_means_no_bypass_check_and_no_error(collector):
    collector.registrations = _Registrations(ApiException(status=404, reason="Not Found"))
    assert collector.admission_registered_since() == (None, ())


def test_an_unreadable_registration_is_said_in_the_errors_and_reports_no_bypass(collector):
    collector.registrations = _Registrations(ApiException(status=403, reason="Forbidden"))
    since, errors = collector.admission_registered_since()
    assert since is None
    assert errors == ("kubernetes: read admission webhook -> HTTP 403 Forbidden: admission bypasses not checked",)


def test_no_configured_webhook_name_reads_nothing(collector):
    collector.admission_webhook = ""
    collector.registrations = _Registrations(ApiException(status=500))
    assert collector.admission_registered_since() == (None, ())
    assert collector.registrations.names == []
