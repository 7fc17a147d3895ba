"""The watching collector (issue 35 item 1) against the real API server: after one list it follows watches,
and each round's snapshot (read from its cache) equals what a full re-list of the cluster says, after a pod is
created, after one is deleted, after the stream is cut mid-way, and after the watch's version is too old (410)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.k8s import KubernetesCollector
from scheduling.collectors.k8s_watch import WatchingCollector
from scheduling.collectors.snapshot import Snapshot

from .conftest import seed, wait_for

pytestmark = pytest.mark.live

ROUND_S = 30.0  # a collection round: each change must show in the next one
NS = "hpo"


@pytest.fixture
def watching(cluster) -> Iterator[WatchingCollector]:
    collector = WatchingCollector(KubernetesCollector(cluster.portal, name="k8s-live"), watch_seconds=20).start()
    try:
        assert collector.wait_synced(ROUND_S), {what: kept.last_error for what, kept in collector.lists.items()}
        yield collector
    finally:
        collector.stop()


def relisted(cluster) -> Snapshot:
    return KubernetesCollector(cluster.portal, name="k8s-live").collect()


def view(snapshot: Snapshot):
    """What a round stores of a snapshot (its time aside), workloads keyed by id."""
    return snapshot.nodes, {w.external_id: w for w in snapshot.workloads}, snapshot.queues, snapshot.pending_gpus


def no_duplicates(snapshot: Snapshot) -> None:
    ids = Counter(w.external_id for w in snapshot.workloads)
    assert not [i for i, n in ids.items() if n > 1]
    assert len({n.name for n in snapshot.nodes}) == len(snapshot.nodes)


def reflected(watching: WatchingCollector, cluster, what: str) -> Snapshot:
    """The watching collector's round once it says what a re-list says (within one round), compared whole."""

    def same():
        mine = watching.collect()
        return mine if view(mine) == view(relisted(cluster)) else None

    snapshot = wait_for(same, timeout=ROUND_S, what=what)
    no_duplicates(snapshot)
    return snapshot


def make_pod(cluster, name: str) -> None:
    cluster.core.create_namespaced_pod(NS, seed.pod_body(seed.Pod(NS, name, 1, user="carol")))


def delete_pod(cluster, name: str) -> None:
    cluster.core.delete_namespaced_pod(name, NS, grace_period_seconds=0)


def created_then_deleted(watching: WatchingCollector, cluster, name: str) -> None:
    """A pod created shows in a round (within one), then is gone from one after it is deleted."""
    make_pod(cluster, name)
    try:
        created = reflected(watching, cluster, f"{name} in a round")
        assert f"{NS}/pod/{name}" in {w.external_id for w in created.workloads}
    finally:
        delete_pod(cluster, name)
    gone = reflected(watching, cluster, f"{name} gone from a round")
    assert f"{NS}/pod/{name}" not in {w.external_id for w in gone.workloads}


def test_the_first_round_from_the_cache_is_the_relisted_snapshot(cluster, watching):
    snapshot = watching.collect()
    assert watching.fallbacks == 0, "read from the cache, not re-listed"
    assert view(snapshot) == view(relisted(cluster))
    assert snapshot.workloads and snapshot.nodes
    no_duplicates(snapshot)


def test_a_pod_created_then_deleted_shows_in_the_next_round_without_a_relist(cluster, watching):
    lists = {what: kept.lists for what, kept in watching.lists.items()}
    created_then_deleted(watching, cluster, "watched-trial")
    assert {what: kept.lists for what, kept in watching.lists.items()} == lists, "events brought the changes"
    assert watching.lists["pods"].events >= 2
    assert watching.fallbacks == 0


def test_a_stream_cut_mid_way_resumes_from_its_version_and_loses_nothing(cluster, watching):
    pods = watching.lists["pods"]
    make_pod(cluster, "cut-before")
    try:
        reflected(watching, cluster, "the first pod in a round")
        watches, lists = pods.watches, pods.lists
        pods.cut()
        make_pod(cluster, "cut-during")  # while the stream is down or just re-opened: replayed from the version
        delete_pod(cluster, "cut-before")
        snapshot = reflected(watching, cluster, "both changes in a round after the cut")
        ids = {w.external_id for w in snapshot.workloads}
        assert f"{NS}/pod/cut-during" in ids and f"{NS}/pod/cut-before" not in ids
        assert pods.watches > watches, "the stream was opened again"
        assert pods.lists == lists, "a cut stream is watched again from its version, not re-listed"
    finally:
        for name in ("cut-before", "cut-during"):
            with contextlib.suppress(ApiException):  # cut-before is deleted by the test itself
                delete_pod(cluster, name)
    reflected(watching, cluster, "the test's pods gone")


def test_a_watch_from_a_version_older_than_the_api_servers_cache_replays_its_state_without_duplicates(
    cluster, watching
):
    # The version a watch resumes from may be older than the API server's watch cache (a process that slept, a
    # restarted API server): a young cache answers with its whole state as ADDED events (an old one with 410
    # Gone, which lists again: tests/collectors/test_k8s_watch.py). The cache is keyed, so nothing doubles.
    pods = watching.lists["pods"]
    pods.version = "1"
    pods.cut()
    created_then_deleted(watching, cluster, "replayed")


def test_while_a_list_is_not_synced_a_round_relists_like_the_plain_collector(cluster, watching):
    pods = watching.lists["pods"]
    pods.synced = False  # as between a 410 and the end of the new list
    try:
        snapshot = watching.collect()
        assert watching.fallbacks == 1
        assert view(snapshot) == view(relisted(cluster))
    finally:
        pods.synced = True
