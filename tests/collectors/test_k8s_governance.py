"""Kubernetes governance objects: the bodies the writer sends read back as the objects they came from."""

from __future__ import annotations

import pytest

from scheduling.collectors.errors import MalformedResponse
from scheduling.collectors.k8s_governance import (
    kueue_cluster_queue_body,
    kueue_local_queue_body,
    namespace_body,
    parse_kueue_cluster_queue,
    parse_kueue_local_queue,
    parse_namespace,
    parse_priority_class,
    parse_quota,
    parse_volcano_queue,
    priority_class_body,
    quota_body,
    quota_usage,
    volcano_queue_body,
)
from scheduling.engine.governance_types import (
    K8sNamespace,
    K8sPriorityClass,
    K8sResourceQuota,
    KueueClusterQueue,
    KueueLocalQueue,
    VolcanoQueue,
)

ROUND_TRIPS = [
    (K8sNamespace("nlp", "research"), namespace_body, parse_namespace),
    (K8sResourceQuota("nlp", "gpuportal-gpu", 12), quota_body, parse_quota),
    (VolcanoQueue("research", 40, 8, 24, False), volcano_queue_body, parse_volcano_queue),
    (VolcanoQueue("research", 40, 8, None, True), volcano_queue_body, parse_volcano_queue),
    (KueueClusterQueue("research", "fleet", "h100", 8, 16, 0), kueue_cluster_queue_body, parse_kueue_cluster_queue),
    (
        KueueClusterQueue("research", "fleet", "h100", 8, None, None),
        kueue_cluster_queue_body,
        parse_kueue_cluster_queue,
    ),
    (
        KueueClusterQueue("research", "fleet", "h100", 8, 16, None, "Any"),
        kueue_cluster_queue_body,
        parse_kueue_cluster_queue,
    ),
    (KueueLocalQueue("nlp", "research", "research"), kueue_local_queue_body, parse_kueue_local_queue),
    (K8sPriorityClass("gpuportal-batch", 1000, "batch"), priority_class_body, parse_priority_class),
]


@pytest.mark.parametrize(("obj", "body", "parse"), ROUND_TRIPS, ids=lambda v: type(v).__name__)
def test_a_written_object_reads_back_as_itself(obj, body, parse):
    assert parse(body(obj)) == obj


def test_every_written_object_is_labelled_as_the_portals():
    for obj, body, _ in ROUND_TRIPS:
        assert body(obj)["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuportal"


def test_the_quota_caps_gpu_requests_by_name():
    assert quota_body(K8sResourceQuota("nlp", "q", 3))["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}


def test_an_uncapped_volcano_queue_sends_a_null_capability_so_a_merge_patch_removes_the_old_cap():
    assert volcano_queue_body(VolcanoQueue("r", 1, 0, None, True))["spec"]["capability"] is None


def test_a_volcano_queue_without_settings_reads_with_volcanos_defaults():
    assert parse_volcano_queue({"metadata": {"name": "default"}, "spec": {}}) == VolcanoQueue(
        "default", 1, 0, None, True
    )


def test_quota_usage_is_unknown_until_the_controller_has_synced_it():
    raw = {"metadata": {"name": "q", "namespace": "nlp"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    assert quota_usage(raw) is None
    raw["status"] = {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "3"}}
    assert quota_usage(raw) == (4, 3)


def test_an_object_without_a_name_is_malformed():
    with pytest.raises(MalformedResponse):
        parse_volcano_queue({"spec": {"weight": 3}})


def test_a_cluster_queue_without_a_preemption_policy_reads_back_as_kueues_default_never():
    body = kueue_cluster_queue_body(KueueClusterQueue("research", "fleet", "h100", 8, 16, None, "Any"))
    del body["spec"]["preemption"]
    assert parse_kueue_cluster_queue(body).reclaim_within_cohort == "Never"


def test_the_cluster_queue_sets_only_the_portals_preemption_policy():
    body = kueue_cluster_queue_body(KueueClusterQueue("research", "fleet", "h100", 8, 16, None, "Any"))
    assert body["spec"]["preemption"] == {"reclaimWithinCohort": "Any"}  # Kueue's defaults stand for the rest
