"""Pods stored in the watch cache with their shared parts once (scheduling/collectors/k8s_compact.py): a compacted
pod is equal to the decoded one in every field, equal parts of different pods are one object, and the table of
shared values is started again once it outgrows the cache."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from scheduling.collectors import k8s_compact
from scheduling.collectors import k8s_wire as wire
from scheduling.collectors.k8s import KubernetesCollector, pod_gpus
from scheduling.collectors.k8s_compact import NodeCompactor, PodCompactor, PodGroupCompactor
from scheduling.collectors.k8s_watch import WatchingCollector

from .conftest import load_fixture
from .test_k8s_watch import event, gpu_pod

FEW = st.sampled_from(["", "a", "team0", "Running", "8", "dgx01"])
LABELS = st.dictionaries(st.sampled_from(["app", "user", "gpuportal.io/team"]), FEW, max_size=3)
QUANTITY = st.one_of(st.sampled_from(["1", "8"]), st.integers(0, 8))
RESOURCES = st.builds(
    wire.Resources,
    requests=st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu"]), QUANTITY, max_size=2),
    limits=st.dictionaries(st.sampled_from(["nvidia.com/gpu", "memory"]), QUANTITY, max_size=2),
)
CONTAINERS = st.lists(st.builds(wire.Container, resources=RESOURCES), max_size=2)
CONDITIONS = st.lists(
    st.builds(wire.Condition, type=st.sampled_from(["Ready", "PodScheduled"]), status=st.sampled_from(["True", None])),
    max_size=2,
)
PODS = st.builds(
    wire.Pod,
    metadata=st.builds(
        wire.ObjectMeta,
        name=st.sampled_from(["p0", "p1", "p2"]),
        namespace=FEW,
        uid=FEW,
        labels=LABELS,
        annotations=st.builds(wire.Annotations, group=FEW, queue=FEW, decision=FEW),
        ownerReferences=st.lists(st.builds(wire.OwnerReference, kind=st.sampled_from(["Job", "PodGroup"])), max_size=2),
        creationTimestamp=st.one_of(st.none(), st.sampled_from(["2026-12-06T10:00:00Z", "2026-12-06T10:00:01Z"])),
    ),
    spec=st.builds(
        wire.PodSpec,
        nodeName=FEW,
        serviceAccountName=FEW,
        schedulerName=FEW,
        priority=st.one_of(st.none(), st.integers(0, 2000)),
        containers=CONTAINERS,
        initContainers=CONTAINERS,
    ),
    status=st.builds(
        wire.PodStatus,
        phase=st.sampled_from(["Pending", "Running"]),
        startTime=st.one_of(st.none(), st.just("2026-12-06T10:00:02Z")),
        conditions=CONDITIONS,
    ),
)


def _copy(pod: wire.Pod) -> wire.Pod:
    """The same pod as a new decode of its JSON would give it: no part shared with ``pod``."""
    return msgspec.json.decode(msgspec.json.encode(pod), type=wire.Pod)


@settings(max_examples=300, deadline=None)
@given(st.lists(PODS, min_size=1, max_size=6))
def test_a_compacted_pod_equals_the_decoded_one_in_every_field(decoded):
    compact = PodCompactor()
    kept = [compact(_copy(pod)) for pod in decoded]
    assert kept == decoded
    assert [msgspec.json.encode(pod) for pod in kept] == [msgspec.json.encode(pod) for pod in decoded]
    assert [pod_gpus(pod) for pod in kept] == [pod_gpus(pod) for pod in decoded]


def test_equal_parts_of_two_pods_become_one_object_and_their_own_parts_stay_theirs():
    first, second = (msgspec.convert(gpu_pod(name=name), wire.Pod) for name in ("a", "b"))
    compact = PodCompactor()
    a, b = compact(first), compact(second)
    assert a.metadata.labels is b.metadata.labels and a.metadata.annotations is b.metadata.annotations
    assert a.spec.containers is b.spec.containers and a.status is b.status
    assert a.metadata.namespace is b.metadata.namespace and a.spec.nodeName is b.spec.nodeName
    assert (a.metadata.name, b.metadata.name) == ("a", "b")


def test_the_table_of_shared_values_starts_again_once_it_outgrows_the_cache(monkeypatch):
    monkeypatch.setattr(k8s_compact, "MIN_TABLE", 4)
    compact = PodCompactor()
    pods = []
    for n in range(6):  # every pod with labels of its own: nothing to share
        pod = gpu_pod(name=f"p{n}")
        pod["metadata"]["labels"] = {"app": f"job-{n}"}
        pods.append(compact(msgspec.convert(pod, wire.Pod)))
    held = len(compact._shared)
    compact.fit(cached=2)
    assert held > 4 and compact._shared == {}
    again = compact(msgspec.convert(gpu_pod(name="p9"), wire.Pod))
    assert again == msgspec.convert(gpu_pod(name="p9"), wire.Pod)
    compact.fit(cached=len(compact._shared))  # within twice the cache: kept
    assert compact._shared


def test_the_watch_cache_keeps_pods_compacted_and_equal_to_what_the_events_carried():
    fixture = [p for p in load_fixture("k8s", "podlist.json")["items"] if pod_gpus(p)]
    collector = WatchingCollector(KubernetesCollector(client.ApiClient(), volcano=False))
    watched = collector.lists["pods"]
    watched.synced = True
    sent = {}
    for copy in ("a", "b"):
        for pod in json.loads(json.dumps(fixture)):
            pod["metadata"]["name"] += f"-{copy}"
            pod["metadata"]["uid"] += f"-{copy}"
            sent[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
            watched.apply(event("ADDED", pod))
    cached = {f"{p.metadata.namespace}/{p.metadata.name}": p for p in watched.items()}
    assert cached == {key: msgspec.convert(pod, wire.Pod) for key, pod in sent.items()}
    for key, pod in cached.items():
        if key.endswith("-a"):
            assert cached[key[:-2] + "-b"].spec.containers is pod.spec.containers


def test_pod_groups_and_nodes_compacted_equal_the_decoded_ones_and_share_what_repeats():
    groups = load_fixture("k8s", "volcano_podgrouplist.json")["items"]
    nodes = load_fixture("k8s", "nodelist.json")["items"]
    cases = (
        (wire.PodGroup, PodGroupCompactor, groups, lambda group: group.status),
        (wire.Node, NodeCompactor, nodes, lambda node: node.status.conditions),
    )
    for kind, compactor, objects, part in cases:
        compact = compactor()
        decoded = [msgspec.convert(obj, kind) for obj in objects * 2]
        kept = [compact(_copy_of(obj, kind)) for obj in decoded]
        assert kept == decoded
        twice = zip(kept[: len(objects)], kept[len(objects) :], strict=True)
        assert all(part(a) is part(b) for a, b in twice)


def _copy_of(obj, kind):
    return msgspec.json.decode(msgspec.json.encode(obj), type=kind)
