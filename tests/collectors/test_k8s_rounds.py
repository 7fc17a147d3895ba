"""A watch cache's rounds built from what changed (scheduling/collectors/k8s_rounds.py) give the snapshot a
listing round gives from the same objects, whatever the events between rounds: pods added, moved, bound,
ended, deleted, changed back and forth within one round; PodGroups made before or after their pods, changed and
deleted; a list read again; a new gang context. Gangs no change touched keep their very workload objects."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from scheduling.collectors.errors import MalformedResponse, SourceUnavailable
from scheduling.collectors.k8s import GPU_RESOURCE, GangContext, KubernetesCollector, build_snapshot
from scheduling.collectors.k8s_watch import WatchingCollector
from scheduling.collectors.snapshot import DEFAULT_TEAMS

from .conftest import load_fixture
from .test_k8s_watch import event

NOW = datetime(2026, 12, 6, tzinfo=UTC)
NODES = [n["metadata"]["name"] for n in load_fixture("k8s", "nodelist.json")["items"]][:3]
GROUPS = ["g0", "g1", "g2"]
PODS = [f"p{i}" for i in range(8)]


def pod(name: str, group: str, node: str, gpus: int, phase: str, label: str) -> dict:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    container = {"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
    return {
        "metadata": {
            "name": name,
            "namespace": "hpo",
            "uid": f"uid-{name}",  # the watch cache's key
            "labels": {"gpuportal.io/user": label},
            "annotations": annotations,
            "creationTimestamp": "2026-12-01T10:00:00Z",
        },
        "spec": {"nodeName": node, "containers": [container], "serviceAccountName": "default"},
        "status": {"phase": phase, "startTime": "2026-12-01T10:00:05Z" if node else None},
    }


def podgroup(name: str, min_member: int, queue: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "hpo", "creationTimestamp": "2026-12-01T09:59:00Z"},
        "spec": {"minMember": min_member, "queue": queue, "minResources": {"nvidia.com/gpu": str(min_member)}},
        "status": {"phase": "Pending"},
    }


pod_events = st.builds(
    lambda kind, *fields: ("pods", kind, pod(*fields)),
    st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
    st.sampled_from(PODS),
    st.sampled_from(["", *GROUPS]),
    st.sampled_from(["", *NODES]),
    st.integers(0, 2),  # 0: a pod the cache does not keep (no GPUs)
    st.sampled_from(["Running", "Pending", "Succeeded"]),
    st.sampled_from(["alice", "bob"]),
)
group_events = st.builds(
    lambda kind, *fields: ("podgroups", kind, podgroup(*fields)),
    st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
    st.sampled_from(GROUPS),
    st.integers(1, 4),
    st.sampled_from(["research", "prod"]),
)
rounds = st.lists(
    st.tuples(
        st.lists(st.one_of(pod_events, group_events), max_size=12),
        st.sampled_from(["changes", "changes", "changes", "relist", "new context"]),
    ),
    min_size=1,
    max_size=8,
)


def normalised(snapshot):
    return (
        sorted(snapshot.workloads, key=lambda w: w.external_id),
        snapshot.nodes,
        snapshot.pending_gpus,
        snapshot.queues,
    )


@settings(max_examples=150, deadline=None)
@given(rounds)
def test_rounds_built_from_changes_give_the_listing_rounds_snapshot(sequence):
    watching = WatchingCollector(KubernetesCollector(client.ApiClient(), name="k"))
    lists = watching.lists
    nodes = load_fixture("k8s", "nodelist.json")["items"]
    for line in (event("ADDED", n) for n in nodes):
        lists["nodes"].apply(line)
    teams = DEFAULT_TEAMS
    last = None
    gang_of_pod: dict[str, str] = {}
    for events, how in sequence:
        gangs_before = dict(gang_of_pod)
        gang_of_pod |= {obj["metadata"]["name"]: _gang_of(obj) for what, _kind, obj in events if what == "pods"}
        for what, kind, obj in events:
            lists[what].apply(event(kind, obj))
        if how == "relist":
            for watched in lists.values():
                watched._changed = None  # as relist() leaves it, the objects being the same
        if how == "new context":
            teams = dataclasses.replace(teams, namespace_teams={"hpo": f"team{len(str(teams))}"})
        context = GangContext("k", teams, GPU_RESOURCE, None)
        items = {what: watched.items() for what, watched in lists.items()}
        built = watching.snapshot_of_cache(context, errors=(), taken_at=NOW)
        listed = build_snapshot(
            "k", nodes=items["nodes"], pods=items["pods"], podgroups=items["podgroups"], teams=teams, taken_at=NOW
        )
        assert normalised(built) == normalised(listed)
        if last is not None and how == "changes":
            _assert_untouched_gangs_kept(last, built, events, gangs_before)
        last = built


def _gang_of(obj: dict) -> str:
    meta = obj["metadata"]
    return f"hpo/{meta['annotations'].get('scheduling.k8s.io/group-name') or 'pod/' + meta['name']}"


def _assert_untouched_gangs_kept(last, built, events, gang_of_pod: dict[str, str]) -> None:
    """No gang a changed object belongs or belonged to was built again (``gang_of_pod``: each pod's gang
    before the round's events)."""
    touched = {f"hpo/{obj['metadata']['name']}" for what, _kind, obj in events if what == "podgroups"}
    for what, _kind, obj in events:
        if what == "pods":
            touched |= {_gang_of(obj), gang_of_pod.get(obj["metadata"]["name"], "")}
    before = {w.external_id: w for w in last.workloads}
    for workload in built.workloads:
        gang = workload.external_id.removesuffix(":pending")
        if gang not in touched and workload.external_id in before:
            assert workload is before[workload.external_id], f"{gang} was built again though nothing of it changed"


def test_a_round_that_fails_half_way_is_followed_by_one_built_from_every_object():
    watching = WatchingCollector(KubernetesCollector(client.ApiClient(), name="k"))
    lists = watching.lists
    context = GangContext("k", DEFAULT_TEAMS, GPU_RESOURCE, None)

    def round_():
        return watching.snapshot_of_cache(context, errors=(), taken_at=NOW)

    lists["pods"].apply(event("ADDED", pod("p0", "g0", "", 1, "Pending", "alice")))
    round_()
    unreadable = podgroup("g0", 2, "research")
    unreadable["spec"]["minResources"] = {"nvidia.com/gpu": "two"}
    lists["podgroups"].apply(event("ADDED", unreadable))
    lists["pods"].apply(event("ADDED", pod("p1", "g0", "", 1, "Pending", "alice")))
    with pytest.raises(MalformedResponse):
        round_()  # p1 is counted, then building g0 fails on its PodGroup
    lists["podgroups"].apply(event("MODIFIED", podgroup("g0", 2, "research")))
    whole = watching.rounds.whole_rounds
    snapshot = round_()  # p1's change went with the failed round: only a whole build still has it in g0
    assert watching.rounds.whole_rounds == whole + 1
    assert [(w.external_id, w.gang_size) for w in snapshot.workloads] == [("hpo/g0", 2)]
    assert snapshot.pending_gpus == 2


class _NotInstalled:
    """A source whose list answers 404, as the API server does for a CRD that is not installed."""

    page_size = 500

    def _raw(self, *args, **kwargs):
        raise SourceUnavailable("kubernetes: list podgroups -> HTTP 404 Not Found", status=404)


def test_a_missing_crd_asked_again_does_not_make_every_round_start_over():
    watching = WatchingCollector(KubernetesCollector(client.ApiClient(), name="k"))
    podgroups = watching.lists["podgroups"]
    podgroups.source = _NotInstalled()
    podgroups.relist()
    assert podgroups.missing and podgroups.take().changed is None  # the first round reads everything
    podgroups.relist()  # asked again while still missing (WatchedList.run, every 30 s)
    assert podgroups.take().changed == {}, "nothing changed: the round builds on the last"
    podgroups.apply(event("ADDED", podgroup("g0", 2, "research")))  # installed meanwhile, then gone again
    podgroups.take()
    podgroups.relist()
    assert podgroups.take().changed is None and podgroups.items() == []
