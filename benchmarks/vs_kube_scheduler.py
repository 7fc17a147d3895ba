"""The real kube-scheduler against the engine's placement, side by side in one run, on the same pods and nodes.

    .venv/bin/python benchmarks/vs_kube_scheduler.py [--nodes 1000] [--pods 5000] [--seed 19]

The fixture's control plane (scripts/k8s/start.sh: kube-apiserver v1.20.2, etcd, kube-scheduler) on this
benchmark's own ports (19401-19405) and a throwaway state dir. 1,000 Node objects of 8 ``nvidia.com/gpu`` are
registered through the API and reported Ready (no kubelet: the scheduler binds to Node objects, KWOK-style,
as scripts/k8s/seed.py does). 5,000 pods asking for 1-8 GPUs (mostly 1, as on shared research clusters: the
mix below, about 92 % of the fleet's GPUs in all) are created while the scheduler is stopped; then the
scheduler is started and every binding is timed from a watch on the pods. The engine then places the same
pods, in the same order (kube-scheduler's queue is FIFO at equal priority), on the same empty nodes
(``ClusterState.place`` + ``commit``), once per policy.

One JSON line per scheduler: placed, unplaced, placements per second (wall; the engine's also per CPU
second), and the fragmentation each final state leaves (``engine.fragmentation.fragmentation_report``
against the pods' own size mix: free GPUs that no request size in the mix can use), free 8-GPU nodes and
the largest gang sizes still placeable. Figures, never assertions; the machine is shared (load in each line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduling.engine.fragmentation import fragmentation_report  # noqa: E402
from scheduling.engine.placement import ClusterState  # noqa: E402
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Request  # noqa: E402

SCRIPTS = ROOT / "scripts" / "k8s"
BIN = Path(os.environ.get("K8S_BIN_DIR", "/var/cache/gpuportal-k8s/go-bin"))
PORTS = {
    "K8S_ETCD_PORT": "19401",
    "K8S_ETCD_PEER_PORT": "19402",
    "K8S_API_PORT": "19403",
    "K8S_SCHEDULER_PORT": "19404",
    "K8S_CONTROLLER_MANAGER_PORT": "19405",
}
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
# GPUs per pod -> share of pods: mean 1.47 GPUs, so 5,000 pods ask for ~92 % of 1,000 x 8 GPUs.
SIZE_MIX = {1: 0.82, 2: 0.09, 3: 0.01, 4: 0.04, 5: 0.01, 6: 0.005, 7: 0.005, 8: 0.02}
ENGINE_POLICIES = ("first-fit", "best-fit", "fgd")
IDLE_S = 20.0  # no new binding for this long: the scheduler has placed all it can


def pod_sizes(count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return rng.choices(list(SIZE_MIX), weights=list(SIZE_MIX.values()), k=count)


def node_names(count: int) -> list[str]:
    return [f"gpu-{i:04d}" for i in range(count)]


def load() -> float:
    return round(os.getloadavg()[0], 1)


# ------------------------------------------------------------------------------------ the engine


def engine_nodes(names: list[str]) -> list[Node]:
    return [Node(name=name, gpu_total=GPUS_PER_NODE, gpu_model="H100", nvlink_domain=name,
                 leaf_switch=f"leaf{i // 32}", spine="spine0") for i, name in enumerate(names)]


def run_engine(policy: str, names: list[str], sizes: list[int]) -> tuple[dict, list[Node]]:
    state = ClusterState(engine_nodes(names), {float(s): p for s, p in SIZE_MIX.items()})
    requests = [Request(f"pod-{i:05d}", gpus_per_member=size) for i, size in enumerate(sizes)]
    placed = 0
    started, started_cpu = time.perf_counter(), time.thread_time()
    for request in requests:
        decision = state.place(request, policy)
        if isinstance(decision, Placement):
            state.commit(decision, request)
            placed += 1
    wall, cpu = time.perf_counter() - started, time.thread_time() - started_cpu
    figures = {"placed": placed, "seconds": round(wall, 3), "placements_per_s": round(placed / wall),
               "cpu_placements_per_s": round(placed / cpu)}
    return figures, list(state.nodes())


# ---------------------------------------------------------------------------- the kube-scheduler


class ControlPlane:
    """start.sh's control plane on this benchmark's ports; its kube-scheduler stopped until ``start_scheduler``."""

    def __init__(self) -> None:
        self.state = tempfile.mkdtemp(prefix="gpuportal-k8s-vs-")
        self.env = {**os.environ, "K8S_STATE_DIR": self.state, "K8S_BIN_DIR": str(BIN), **PORTS}
        self.scheduler: subprocess.Popen | None = None

    def __enter__(self) -> ControlPlane:
        done = subprocess.run(["bash", str(SCRIPTS / "start.sh")], env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode != 0:
            self.__exit__()
            raise SystemExit(f"scripts/k8s/start.sh failed: {done.stderr.strip()[-800:]}")
        self.values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self._stop_pid_file("kube-scheduler")
        return self

    def _stop_pid_file(self, name: str) -> None:
        pid_file = Path(self.state) / "run" / f"{name}.pid"
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def start_scheduler(self) -> None:
        """The same kube-scheduler command line start.sh runs."""
        log = open(Path(self.state) / "log" / "kube-scheduler-bench.log", "w")  # noqa: SIM115 - lives with it
        self.scheduler = subprocess.Popen(
            [str(BIN / "kube-scheduler"), "--kubeconfig", self.values["K8S_SCHEDULER_KUBECONFIG"],
             "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", PORTS["K8S_SCHEDULER_PORT"],
             "--profiling=false", "--v", "1"],
            stdout=log, stderr=subprocess.STDOUT,
        )

    def __exit__(self, *exc) -> None:
        if self.scheduler is not None:
            self.scheduler.terminate()
            self.scheduler.wait(timeout=30)
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=self.env, capture_output=True, timeout=120,
                       check=False)
        shutil.rmtree(self.state, ignore_errors=True)


def parallel(calls, workers: int = 8) -> None:
    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def register_nodes(core, names: list[str]) -> None:
    sys.path.insert(0, str(SCRIPTS))
    import seed  # scripts/k8s/seed.py: a kubelet's registration (KWOK reports Ready), the not-ready taint lifted

    seed.register_nodes(core, [seed.node_body(name, f"leaf{i // 32}") for i, name in enumerate(names)])


def pod_body(index: int, gpus: int) -> dict:
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/sleep:1", "resources": resources}
    return {"metadata": {"name": f"pod-{index:05d}"}, "spec": {"containers": [container]}}


def create_pods(core, sizes: list[int]) -> None:
    """In order (the scheduler's FIFO), from one thread: creation order is queue order at equal priority."""
    for index, gpus in enumerate(sizes):
        core.create_namespaced_pod("default", pod_body(index, gpus))


def watch_bindings(core, total: int, resource_version: str, bound: dict[str, tuple[float, str]]) -> None:
    """pod name -> (monotonic time first seen bound, node), until every pod is bound or none binds for IDLE_S.
    The watch is read raw (a JSON line per event, parsed in C): the client's model objects would cost the
    scheduler the CPU it shares with this process."""
    last_change = time.monotonic()
    while len(bound) < total and time.monotonic() - last_change < IDLE_S:
        response = core.list_namespaced_pod(
            "default", watch=True, resource_version=resource_version, timeout_seconds=5,
            allow_watch_bookmarks=False, _preload_content=False, _request_timeout=10,
        )
        for line in response:
            pod = json.loads(line)["object"]
            resource_version = pod["metadata"]["resourceVersion"]
            node, name = pod["spec"].get("nodeName"), pod["metadata"]["name"]
            if node and name not in bound:
                bound[name] = (time.monotonic(), node)
                last_change = time.monotonic()
            if len(bound) == total:
                break
        response.release_conn()


def server_bind_span(core) -> float:
    """Seconds between the first and the last PodScheduled=True the apiserver recorded (1 s resolution)."""
    times = []
    for pod in core.list_namespaced_pod("default").items:
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "True":
                times.append(condition.last_transition_time)
    return (max(times) - min(times)).total_seconds() if times else 0.0


def run_kube_scheduler(names: list[str], sizes: list[int]) -> tuple[dict, dict[str, str]]:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    with ControlPlane() as plane:
        api = k8s_config.new_client_from_config(config_file=plane.values["K8S_ADMIN_KUBECONFIG"])
        api.configuration.connection_pool_maxsize = 16
        core = k8s.CoreV1Api(api)
        started = time.perf_counter()
        register_nodes(core, names)
        setup = {"register_nodes_s": round(time.perf_counter() - started, 1)}
        started = time.perf_counter()
        create_pods(core, sizes)
        setup["create_pods_s"] = round(time.perf_counter() - started, 1)
        version = core.list_namespaced_pod("default", limit=1).metadata.resource_version
        bound: dict[str, tuple[float, str]] = {}
        watcher = threading.Thread(target=watch_bindings, args=(core, len(sizes), version, bound))
        watcher.start()
        launched = time.monotonic()
        plane.start_scheduler()
        watcher.join()
        server_span = server_bind_span(core)
        api.close()
    times = sorted(at for at, _node in bound.values())
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    figures = {
        "placed": len(bound),
        "seconds": round(span, 2),
        "placements_per_s": round(len(bound) / span) if span else None,
        "seconds_from_scheduler_start": round(times[-1] - launched, 2) if times else None,
        "apiserver_bind_span_s": server_span,
        **setup,
    }
    return figures, {name: node for name, (_at, node) in bound.items()}


def final_nodes(names: list[str], sizes: list[int], binding: dict[str, str]) -> list[Node]:
    used: Counter[str] = Counter()
    for index, gpus in enumerate(sizes):
        node = binding.get(f"pod-{index:05d}")
        if node:
            used[node] += gpus
    return [
        Node(name=node.name, gpu_total=GPUS_PER_NODE, gpu_model="H100", nvlink_domain=node.name,
             leaf_switch=node.leaf_switch, spine=node.spine,
             gpu_free_milli=(0,) * used[node.name] + (MILLI_PER_GPU,) * (GPUS_PER_NODE - used[node.name]))
        for node in engine_nodes(names)
    ]


def leftovers(nodes: list[Node], sizes: list[int], placed: int) -> dict:
    report = fragmentation_report(nodes, {float(s): p for s, p in SIZE_MIX.items()})
    return {
        "unplaced": len(sizes) - placed,
        "free_gpus": report.free_gpus,
        "fragmented_gpus": round(report.fragmented_gpus, 1),
        "fragmented_share_of_free": round(report.fragmented_fraction, 3),
        "empty_nodes": sum(1 for n in nodes if n.gpu_free_whole == GPUS_PER_NODE),
        "placeable_8_gpu_pods": report.largest_placeable[8],
        "placeable_4_gpu_pods": report.largest_placeable[4],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=19)
    args = parser.parse_args()
    if os.geteuid() != 0 or not (BIN / "kube-scheduler").exists() or not (BIN / "etcd").exists():
        print(json.dumps({"skipped": "needs root and scripts/k8s/install.sh's binaries"}))
        return
    names, sizes = node_names(args.nodes), pod_sizes(args.pods, args.seed)
    common = {"nodes": args.nodes, "pods": args.pods, "gpus_asked": sum(sizes),
              "gpus_in_fleet": args.nodes * GPUS_PER_NODE}
    figures, binding = run_kube_scheduler(names, sizes)
    kube_nodes = final_nodes(names, sizes, binding)
    print(json.dumps({"scheduler": "kube-scheduler v1.20.2 (default profile)", **common, **figures,
                      **leftovers(kube_nodes, sizes, figures["placed"]), "load_1min": load()}), flush=True)
    for policy in ENGINE_POLICIES:
        figures, nodes = run_engine(policy, names, sizes)
        print(json.dumps({"scheduler": f"engine {policy}", **common, **figures,
                          **leftovers(nodes, sizes, figures["placed"]), "load_1min": load()}), flush=True)


if __name__ == "__main__":
    main()
