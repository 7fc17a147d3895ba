"""The watch cache's event handling (scheduling/collectors/k8s_watch.py), on the API server's own wire form:
each event replaces, adds or removes one object by its key, bookmarks move the version on, a 410 or any
ERROR event asks for a new list, and a line that is not a whole event is refused (the cache would no longer be
known to be whole). The list/watch loop against a real API server: tests/k8s_live/test_watch_live.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kubernetes import client

from scheduling.collectors.errors import MalformedResponse
from scheduling.collectors.k8s import KubernetesCollector
from scheduling.collectors.k8s_watch import Gone, WatchingCollector, _lines

from .conftest import load_fixture

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def pods():
    return load_fixture("k8s", "podlist.json")["items"]


def gpu_pod(name: str = "trial", node: str = "dgx01", rv: str = "10") -> dict:
    pod = json.loads(json.dumps(next(p for p in pods() if p["spec"].get("nodeName"))))
    pod["metadata"] |= {"name": name, "namespace": "hpo", "uid": f"uid-{name}", "resourceVersion": rv}
    pod["spec"]["nodeName"] = node
    return pod


def event(kind: str, obj: dict) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


@pytest.fixture
def watched():
    collector = WatchingCollector(KubernetesCollector(client.ApiClient(), volcano=False))
    pods_list = collector.lists["pods"]
    pods_list.synced = True
    return pods_list


def test_added_modified_and_deleted_events_keep_one_object_per_pod(watched):
    watched.apply(event("ADDED", gpu_pod(rv="10")))
    watched.apply(event("ADDED", gpu_pod(rv="10")))  # replayed after a re-watch: replaces, never doubles
    watched.apply(event("MODIFIED", gpu_pod(node="dgx02", rv="11")))
    assert [p.spec.nodeName for p in watched.items()] == ["dgx02"]
    assert watched.version == "11"
    watched.apply(event("DELETED", gpu_pod(node="dgx02", rv="12")))
    assert watched.items() == [] and watched.version == "12"


def test_a_pod_modified_to_hold_no_gpus_leaves_the_cache(watched):
    watched.apply(event("ADDED", gpu_pod()))
    cpu_only = gpu_pod(rv="13")
    for container in cpu_only["spec"]["containers"] + cpu_only["spec"].get("initContainers", []):
        container["resources"] = {}
    watched.apply(event("MODIFIED", cpu_only))
    assert watched.items() == []


def test_a_bookmark_moves_the_version_and_changes_nothing(watched):
    watched.apply(event("ADDED", gpu_pod(rv="10")))
    watched.apply(event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "99"}}))
    assert watched.version == "99" and len(watched.items()) == 1 and watched.events == 1


@pytest.mark.parametrize("code", [410, 500])
def test_an_error_event_asks_for_a_new_list(watched, code):
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "message": "too old resource version: 5 (300)",
        "reason": "Expired",
    }
    with pytest.raises(Gone, match=f"watch error {code}"):
        watched.apply(event("ERROR", status))


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"ADDED","object":{"metadata":',
        b'{"type":"ADDED","object":{"metadata":{"name":7}}}',
        event("RENAMED", gpu_pod()),
    ],
)
def test_a_line_that_is_not_a_whole_readable_event_is_refused(watched, line):
    watched.apply(event("ADDED", gpu_pod()))
    with pytest.raises(MalformedResponse):
        watched.apply(line)
    assert len(watched.items()) == 1


class Chunks:
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def stream(self, amt: int, decode_content: bool = False):
        yield from self.chunks


def test_events_cut_anywhere_by_the_stream_chunks_are_read_whole():
    first, second = event("ADDED", gpu_pod("a")), event("ADDED", gpu_pod("b"))
    stream = first + b"\n" + second + b"\n"
    cut = [stream[:7], stream[7 : len(first) + 3], stream[len(first) + 3 :]]
    assert list(_lines(Chunks(*cut))) == [first, second]
    assert list(_lines(Chunks(first, b"\n", second))) == [first, second]  # no newline after the last
