"""The collector carries what "admission bypassed" needs: the scheduler a pod asked for, and the GPU pods created
since the portal's webhook was registered, that its rules and selectors send it, and that bear no decision of it."""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduling.collectors import k8s_wire as wire
from scheduling.collectors.k8s import KubernetesCollector, build_snapshot, epoch
from scheduling.collectors.k8s_admission import Admission, WebhookScope, covers_pod_creation
from scheduling.collectors.reliability import NO_RETRY
from scheduling.engine.label_selector import EVERYTHING
from tests.collectors.conftest import load_fixture

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


def _sent_everything(since):
    """A webhook sent every pod creation, as deploy/k8s/admission.yaml's is in a namespace not labelled off."""
    return None if since is None else Admission(since, (WebhookScope(EVERYTHING, EVERYTHING),), {"nlp": {}})


def _workloads(pods, since):
    admission = _sent_everything(since)
    return {w.name: w for w in build_snapshot("k8s-a", nodes=[], pods=pods, admission=admission).workloads}


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
    [gang] = build_snapshot("k8s-a", nodes=[], pods=members, admission=_sent_everything(epoch(REGISTERED))).workloads
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
    admission, errors = collector.admission()
    assert (admission.since, admission.webhooks, errors) == (epoch(REGISTERED), (), ())
    assert collector.registrations.names == ["gpuportal-admission"]


def test_no_registered_webhook_means_no_bypass_check_and_no_error(collector):
    collector.registrations = _Registrations(ApiException(status=404, reason="Not Found"))
    assert collector.admission() == (None, ())


def test_an_unreadable_registration_is_said_in_the_errors_and_reports_no_bypass(collector):
    collector.registrations = _Registrations(ApiException(status=403, reason="Forbidden"))
    admission, errors = collector.admission()
    assert admission is None
    assert errors == ("kubernetes: read admission webhook -> HTTP 403 Forbidden: admission bypasses not checked",)


def test_no_configured_webhook_name_reads_nothing(collector):
    collector.admission_webhook = ""
    collector.registrations = _Registrations(ApiException(status=500))
    assert collector.admission() == (None, ())
    assert collector.registrations.names == []


# ------------------------------------------------- a whole round: the webhook's rules and selectors are honoured

CREATED = "2026-12-04T10:05:00Z"  # after the recorded configuration's creationTimestamp


def _recorded_pod(namespace, name, labels=None):
    """The recorded single GPU pod (notebook-0: no group, no decision) moved to ``namespace`` as ``name``."""
    pod = copy.deepcopy(next(p for p in load_fixture("k8s", "podlist.json")["items"]
                             if p["metadata"]["name"] == "notebook-0"))
    pod["metadata"].update(namespace=namespace, name=name, uid=f"uid-{namespace}-{name}", creationTimestamp=CREATED)
    pod["metadata"]["labels"] = {**pod["metadata"]["labels"], **(labels or {})}
    return pod


def _response(document):
    return type("Response", (), {"data": json.dumps(document).encode(), "release_conn": lambda self: None})()


class _Core:
    """CoreV1Api with ``_preload_content=False``: the recorded-style lists, and which were asked for."""

    def __init__(self, pods, namespaces):
        self.pods, self.namespaces, self.calls = pods, namespaces, []

    def list_node(self, **kwargs):
        self.calls.append("nodes")
        return _response({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []})

    def list_pod_for_all_namespaces(self, **kwargs):
        self.calls.append("pods")
        return _response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": self.pods})

    def list_namespace(self, **kwargs):
        self.calls.append("namespaces")
        if isinstance(self.namespaces, ApiException):
            raise self.namespaces
        return _response(self.namespaces)


def _configuration(**webhook):
    """deploy/k8s/admission.yaml's configuration as the API server serves it, its one webhook changed by ``webhook``."""
    config = load_fixture("k8s", "mutatingwebhookconfiguration.json")
    config["webhooks"][0].update(webhook)
    return config


def _round(config, pods, namespaces=None):
    collector = KubernetesCollector(client.ApiClient(), retry=NO_RETRY, volcano=False)
    collector.registrations = _Registrations(json.dumps(config).encode())
    collector.core = _Core(pods, load_fixture("k8s", "namespacelist.json") if namespaces is None else namespaces)
    snapshot = collector.collect()
    found = {f"{gap.namespace}/{gap.pod}" for w in snapshot.workloads for gap in w.admission_gaps}
    return found, snapshot, collector.core.calls


TEAM_PODS = [_recorded_pod("nlp", "raw"), _recorded_pod("vision", "raw"), _recorded_pod("gpuportal", "raw")]


def test_a_pod_in_a_namespace_the_namespace_selector_leaves_out_is_no_finding_and_a_sent_one_still_is():
    found, snapshot, calls = _round(_configuration(), TEAM_PODS)
    # vision and gpuportal are labelled gpuportal.io/admission=disabled: the webhook is never sent their pods.
    assert found == {"nlp/raw"}
    assert len(snapshot.workloads) == 3 and snapshot.errors == ()
    assert calls.count("namespaces") == 1  # once per round, not per pod


def test_the_namespace_name_label_the_api_server_adds_is_matched_like_any_other():
    only_nlp = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["nlp"]}]}
    found, _snapshot, _calls = _round(_configuration(namespaceSelector=only_nlp),
                                      [_recorded_pod("nlp", "raw"), _recorded_pod("default", "raw")])
    assert found == {"nlp/raw"}


def test_a_pod_the_object_selector_leaves_out_is_no_finding_and_a_selected_one_still_is():
    opted_in = {"matchLabels": {"gpuportal.io/route": "yes"}}
    pods = [_recorded_pod("nlp", "routed-please", {"gpuportal.io/route": "yes"}), _recorded_pod("nlp", "plain")]
    found, snapshot, _calls = _round(_configuration(objectSelector=opted_in), pods)
    assert found == {"nlp/routed-please"} and snapshot.errors == ()


@pytest.mark.parametrize(
    ("rule", "covers"),
    [
        ({"resources": ["pods"]}, True),
        ({"resources": ["*"]}, True),
        ({"resources": ["*/*"]}, True),
        ({"resources": ["pods/*"]}, True),  # the API server's "*" subresource also matches none
        ({"resources": ["pods/binding"]}, False),
        ({"resources": ["*/status"]}, False),
        ({"resources": ["deployments", "pods"]}, True),
        ({"resources": ["podgroups"]}, False),
        ({"operations": ["*"]}, True),
        ({"operations": ["UPDATE", "CREATE"]}, True),
        ({"operations": ["DELETE"]}, False),
        ({"apiGroups": ["*"]}, True),
        ({"apiGroups": ["apps"]}, False),
        ({"apiVersions": ["*"]}, True),
        ({"apiVersions": ["v1beta1"]}, False),
        ({"scope": "Namespaced"}, True),
        ({"scope": "Cluster"}, False),
        ({"scope": "Elsewhere"}, False),  # an unknown scope matches nothing, as in the API server
    ],
)
def test_which_rules_cover_the_creation_of_a_pod(rule, covers):
    base = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    assert covers_pod_creation(wire.as_wire({**base, **rule}, wire.WebhookRule, "rule")) is covers


@pytest.mark.parametrize(
    "rules",
    [
        [{"operations": ["CREATE"], "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]}],
        [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}],
        [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"], "scope": "Cluster"}],
        [],
    ],
    ids=["jobs-only", "update-only", "a-subresource", "cluster-scope", "no-rules"],
)
def test_rules_that_do_not_cover_creating_pods_give_no_finding(rules):
    found, snapshot, calls = _round(_configuration(rules=rules), TEAM_PODS)
    assert found == set() and snapshot.errors == ()
    assert "namespaces" not in calls  # no webhook is sent pods: nothing to judge by namespace


def test_an_unknown_selector_operator_is_the_rounds_error_and_gives_no_finding():
    unknown = {"matchExpressions": [{"key": "gpuportal.io/admission", "operator": "Matches", "values": ["disabled"]}]}
    found, snapshot, _calls = _round(_configuration(namespaceSelector=unknown), TEAM_PODS)
    assert found == set()
    assert len(snapshot.workloads) == 3  # the round itself goes on: only bypasses are not judged
    assert snapshot.errors == (
        "kubernetes: admission webhook gpuportal-admission: label selector: 'Matches' is not a valid operator "
        "(key 'gpuportal.io/admission'): admission bypasses not checked",
    )


def test_a_mistyped_selector_is_the_rounds_error_and_gives_no_finding():
    mistyped = {"matchExpressions": [{"key": "gpuportal.io/admission", "operator": "NotIn", "values": "disabled"}]}
    found, snapshot, _calls = _round(_configuration(namespaceSelector=mistyped), TEAM_PODS)
    assert found == set() and len(snapshot.workloads) == 3
    [error] = snapshot.errors
    assert "namespaceSelector.matchExpressions[0].values" in error and error.endswith("admission bypasses not checked")


def test_namespaces_that_cannot_be_listed_are_the_rounds_error_and_give_no_finding():
    found, snapshot, _calls = _round(_configuration(), TEAM_PODS, ApiException(status=403, reason="Forbidden"))
    assert found == set()
    assert snapshot.errors == ("kubernetes: list namespaces -> HTTP 403 Forbidden: admission bypasses not checked",)
