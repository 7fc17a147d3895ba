"""Many clusters from recorded answers (issue 35 item 3): every fixture names its nodes dgx01-08 (Ray: ray-head,
ray-worker-1/2), so clusters registered together repeat node names as real separate sites do.

* ``recorded_snapshot(kind, name)``: the recorded answers of one kind run through that kind's real parser;
  ``recorded_collector`` hands it to ``collection.scrape`` (its ``collector_for``), so the whole scrape path
  (lease, breaker, ingest, ledger views, samples) runs per orchestrator.
* ``ray_dashboard()``: a real local HTTP server answering as a Ray dashboard from the recorded answers, for
  processes (a Celery worker) that scrape over HTTP; ``hanging_server()`` accepts and never answers.
"""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scheduling.collectors import k8s, ray, slurm
from scheduling.collectors.snapshot import Snapshot

FIXTURES = Path(__file__).resolve().parent / "collectors" / "fixtures"
# 4 Slurm, 6 Kubernetes, 3 Ray: the site.
SITE = (("slurm", 4), ("kubernetes", 6), ("ray", 3))


def _doc(kind: str, name: str):
    return json.loads((FIXTURES / kind / name).read_text())


def recorded_snapshot(kind: str, name: str) -> Snapshot:
    """One round of a cluster of ``kind`` as its recorded answers read (the kind's own parser)."""
    if kind == "slurm":
        docs = [_doc("slurm", f"v0.0.40_{what}.json") for what in ("nodes", "jobs", "partitions")]
        topology = slurm.parse_topology((FIXTURES / "slurm" / "topology.conf").read_text())
        return slurm.build_snapshot(name, *docs, topology=topology)
    if kind == "kubernetes":
        return k8s.build_snapshot(
            name,
            nodes=_doc("k8s", "nodelist.json")["items"],
            pods=_doc("k8s", "podlist.json")["items"],
            queues=_doc("k8s", "volcano_queuelist.json")["items"],
            podgroups=_doc("k8s", "volcano_podgrouplist.json")["items"],
        )
    return ray.build_snapshot(name, **{key: _doc("ray", file) for key, file in RAY_DOCS.items()})


RAY_DOCS = {
    "nodes_doc": "api_v0_nodes_detail_true.json",
    "status_doc": "api_cluster_status.json",
    "jobs_doc": "api_jobs.json",
    "placement_groups_doc": "api_v0_placement_groups_detail_true.json",
    "tasks_doc": "api_v0_tasks_detail_true_limit_100.json",
    "actors_doc": "api_v0_actors_detail_true.json",
}


class _Recorded:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Snapshot:
        return self.snapshot


def recorded_collector(orchestrator, _breaker) -> _Recorded:
    """``collection.scrape``'s ``collector_for``: the recorded answers of the orchestrator's kind."""
    return _Recorded(recorded_snapshot(orchestrator.kind, orchestrator.name))


def site_names() -> list[tuple[str, str]]:
    """(kind, name) of the 13 clusters: slurm-1..4, k8s-1..6, ray-1..3."""
    short = {"slurm": "slurm", "kubernetes": "k8s", "ray": "ray"}
    return [(kind, f"{short[kind]}-{i}") for kind, count in SITE for i in range(1, count + 1)]


# Ray dashboard paths -> recorded answer (query strings do not matter to the recording).
RAY_PATHS = {
    "/api/cluster_status": "api_cluster_status.json",
    "/api/jobs/": "api_jobs.json",
    "/api/v0/nodes": "api_v0_nodes_detail_true.json",
    "/api/v0/placement_groups": "api_v0_placement_groups_detail_true.json",
    "/api/v0/tasks": "api_v0_tasks_detail_true_limit_100.json",
    "/api/v0/actors": "api_v0_actors_detail_true.json",
}


class _RayHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        file = RAY_PATHS.get(self.path.split("?", 1)[0])
        body = (FIXTURES / "ray" / file).read_bytes() if file else b'{"detail": "not found"}'
        self.send_response(200 if file else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


class _HangingHandler(socketserver.BaseRequestHandler):
    """Reads the request and answers nothing for a minute (an apiserver or dashboard that stopped answering)."""

    def handle(self) -> None:
        self.request.settimeout(1)
        try:
            self.request.recv(65536)
        except OSError:
            return
        stop = time.monotonic() + 60
        while time.monotonic() < stop:
            time.sleep(0.2)


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[str]:
    """``server`` answering on a thread of its own (each connection on its own too) while the block runs."""
    server.daemon_threads = True  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def ray_dashboard() -> Iterator[str]:
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RayHandler)) as url:
        yield url


@contextmanager
def hanging_server() -> Iterator[str]:
    with serving(socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HangingHandler)) as url:
        yield url
