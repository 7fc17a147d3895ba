"""kube-scheduler, Kueue and the portal's own placement side by side, in one run, on one KWOK cluster.

    .venv/bin/python benchmarks/vs_k8s_schedulers.py [--nodes 32] [--seed 7] [--load 1.1]

The live fixture (scripts/k8s/start.sh: kube-apiserver v1.36.3, etcd, kube-scheduler, kube-controller-manager's
job controller, KWOK) on free ports below 32768 and a throwaway state dir, ``--nodes`` KWOK nodes of 8
``nvidia.com/gpu``, and Kueue v0.17.0 (scripts/k8s/kueue.py) with one ClusterQueue whose nominal quota is the
whole cluster. The workload: jobs drawn (seeded) from the openb pod list's whole-GPU pods (openb-default: 1-8 GPUs,
one pod) and from Philly's multi-node jobs (gangs: ``members`` >= 2 pods of up to 8 GPUs), until they ask for
``--load`` x the cluster's GPUs. Each job is a ``batch/v1`` Job with ``parallelism = completions = members``.

- **kube-scheduler**: the Jobs without a queue; the job controller makes every pod, kube-scheduler binds them
  one at a time (no gangs: a gang may be bound in part, its bound members holding GPUs while the rest wait);
- **Kueue**: the same Jobs in a LocalQueue; Kueue admits a whole Job when the quota holds all of it (quota only:
  without topology-aware scheduling it does not look at nodes), then kube-scheduler binds its pods;
- **portal**: the engine's placement (``ClusterState.place`` + ``commit``, best-fit and FGD, gangs all or
  nothing) on the same nodes, in the same order, no cluster involved.

One JSON line per scheduler: jobs and gangs (members > 1) placed whole, gangs bound in part and the GPUs they hold,
GPUs in use / the cluster's (utilisation), fragmentation as FGD measures it (the free GPUs the workload's size mix
cannot use, ``fragmented_gpus_fgd``), time to place (first Job created -> last pod bound, polled every
0.25 s) and the median/p95 of each Job's time from creation to its last member bound. Figures, never assertions;
the machine is shared (load in each line). The seed's claim that gang scheduling adds 200-800 ms per pod is not
measured here: no gang scheduler runs (Volcano is not served by the module proxy).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client as k8s  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from scheduling.engine.fragmentation import expected_fragment_milli  # noqa: E402
from scheduling.engine.placement import ClusterState  # noqa: E402
from scheduling.engine.sizemix import normalised_mix, size_mix_of  # noqa: E402
from scheduling.engine.types import Node, Placement, Request  # noqa: E402
from scheduling.traces.registry import load_trace  # noqa: E402

SCRIPTS = ROOT / "scripts" / "k8s"
BIN = Path(os.environ.get("K8S_BIN_DIR", "/var/cache/gpuportal-k8s/go-bin"))
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
KUEUE = ("kueue.x-k8s.io", "v1beta2")
IDLE_S = 10.0  # no new binding for this long: the scheduler has placed what it can
POLL_S = 0.25
PORT_KEYS = ("K8S_ETCD_PORT", "K8S_ETCD_PEER_PORT", "K8S_API_PORT", "K8S_SCHEDULER_PORT",
             "K8S_CONTROLLER_MANAGER_PORT", "K8S_KUEUE_WEBHOOK_PORT", "K8S_KUEUE_HEALTH_PORT")


def load() -> float:
    return round(os.getloadavg()[0], 1)


def free_low_port(taken: set[int]) -> int:
    """A free loopback port below the ephemeral range (32768-60999)."""
    rng = random.Random()
    while True:
        port = rng.randint(20000, 32000)
        if port in taken:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port


def load_seed():
    spec = importlib.util.spec_from_file_location("gpuportal_k8s_seed", SCRIPTS / "seed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ the workload


def workload(capacity: int, load_factor: float, seed: int) -> list[Request]:
    """Jobs from openb's whole-GPU pods (7 in 10) and Philly's multi-node jobs (3 in 10: gangs of 2 or more
    pods) until they ask for ``load_factor`` x ``capacity`` GPUs."""
    openb = [j.request for j in load_trace("openb-default").jobs if j.request.gpus_per_member >= 1]
    philly = [j.request for j in load_trace("philly").jobs if j.request.members > 1]
    rng, jobs, asked = random.Random(seed), [], 0
    while asked < load_factor * capacity:
        source = rng.choice(philly) if rng.random() < 0.3 else rng.choice(openb)
        per = min(source.gpus_per_member, GPUS_PER_NODE)
        jobs.append(Request(f"job-{len(jobs):04d}", members=source.members, gpus_per_member=per))
        asked += source.members * per
    return jobs


def job_body(request: Request, queue: str | None) -> dict:
    resources = {"requests": {GPU: str(request.gpus_per_member)}, "limits": {GPU: str(request.gpus_per_member)}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/train:1", "resources": resources}
    metadata: dict = {"name": request.id}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        "spec": {"parallelism": request.members, "completions": request.members, "backoffLimit": 0,
                 "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                       "containers": [container]}}},
    }


# ------------------------------------------------------------------------------------------ the cluster


class Fixture:
    """start.sh + KWOK nodes + kueue.py, on free ports below 32768 and a state dir of its own."""

    def __init__(self, nodes: int) -> None:
        taken: set[int] = set()
        self.state = tempfile.mkdtemp(prefix="gpuportal-k8s-vs-")
        self.env = {**os.environ, "K8S_STATE_DIR": self.state, "K8S_BIN_DIR": str(BIN),
                    **{key: str(free_low_port(taken)) for key in PORT_KEYS}}
        done = self._run(["bash", str(SCRIPTS / "start.sh")], 180)
        values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self.admin = k8s_config.new_client_from_config(config_file=values["K8S_ADMIN_KUBECONFIG"])
        seed = load_seed()
        bodies = [seed.node_body(f"vs{i:04d}", f"leaf{i // 16}", GPUS_PER_NODE) for i in range(nodes)]
        seed.register_nodes(k8s.CoreV1Api(self.admin), bodies)
        self._run([sys.executable, str(SCRIPTS / "kueue.py"), "start", self.state], 300)
        custom = k8s.CustomObjectsApi(self.admin)
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {
            "apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})
        quota = {"name": GPU, "nominalQuota": nodes * GPUS_PER_NODE}
        custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
            "apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": "bench"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [
                {"coveredResources": [GPU], "flavors": [{"name": "default-flavor", "resources": [quota]}]}]}})

    def _run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            self.stop()
            raise SystemExit(f"{argv[-2:]} failed (logs in {self.state}/log):\n{done.stdout}\n{done.stderr}")
        return done

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=self.env, capture_output=True, timeout=60,
                       check=False)
        shutil.rmtree(self.state, ignore_errors=True)


def run_cluster(fixture: Fixture, name: str, jobs: list[Request], capacity: int, kueue: bool) -> dict:
    core, batch = k8s.CoreV1Api(fixture.admin), k8s.BatchV1Api(fixture.admin)
    ns = f"vs-{name}"
    core.create_namespace({"metadata": {"name": ns}})
    if kueue:
        k8s.CustomObjectsApi(fixture.admin).create_namespaced_custom_object(*KUEUE, ns, "localqueues", {
            "apiVersion": "/".join(KUEUE), "kind": "LocalQueue", "metadata": {"name": "bench"},
            "spec": {"clusterQueue": "bench"}})
    created: dict[str, float] = {}
    started = time.monotonic()
    for request in jobs:
        batch.create_namespaced_job(ns, job_body(request, "bench" if kueue else None))
        created[request.id] = time.monotonic()
    bound_at: dict[str, float] = {}  # pod -> when first seen bound
    job_of: dict[str, str] = {}
    node_of: dict[str, str] = {}
    last_change = time.monotonic()
    while time.monotonic() - last_change < IDLE_S:
        now = time.monotonic()
        for pod in core.list_namespaced_pod(ns).items:
            if pod.spec.node_name and pod.metadata.name not in bound_at:
                bound_at[pod.metadata.name] = now
                job_of[pod.metadata.name] = (pod.metadata.labels or {}).get("job-name", "")
                node_of[pod.metadata.name] = pod.spec.node_name
                last_change = now
        time.sleep(POLL_S)
    figures = cluster_figures(jobs, bound_at, job_of, created, started, capacity)
    per_member = {request.id: request.gpus_per_member for request in jobs}
    used: dict[str, float] = {}
    for pod, node in node_of.items():
        used[node] = used.get(node, 0.0) + per_member.get(job_of[pod], 0.0)
    figures["fragmented_gpus_fgd"] = fgd_fragmented(used, jobs, capacity // GPUS_PER_NODE)
    if kueue:
        workloads = k8s.CustomObjectsApi(fixture.admin).list_namespaced_custom_object(*KUEUE, ns, "workloads")
        conditions = [(w.get("status") or {}).get("conditions") or () for w in workloads["items"]]
        figures["kueue_admitted"] = sum(
            any(c["type"] == "Admitted" and c["status"] == "True" for c in found) for found in conditions)
    core.delete_namespace(ns)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            core.read_namespace(ns)
        except ApiException as error:
            if error.status == 404:
                break
        time.sleep(1)
    return {"scheduler": name, **figures}


def cluster_figures(jobs: list[Request], bound_at: dict[str, float], job_of: dict[str, str],
                    created: dict[str, float], started: float, capacity: int) -> dict:
    by_job: dict[str, list[float]] = {}
    for pod, at in bound_at.items():
        by_job.setdefault(job_of[pod], []).append(at)
    whole, partial, partial_gpus, gangs_whole, waits = 0, 0, 0, 0, []
    gpus = 0
    for request in jobs:
        times = by_job.get(request.id, [])
        gpus += len(times) * request.gpus_per_member
        if len(times) == request.members:
            whole += 1
            gangs_whole += request.members > 1
            waits.append(max(times) - created[request.id])
        elif times:
            partial += 1
            partial_gpus += len(times) * request.gpus_per_member
    return {
        "jobs_placed": whole, "gangs_placed": gangs_whole, "gangs_in_part": partial, "gpus_held_by_part_gangs":
        partial_gpus, "gpus_in_use": gpus, "utilisation": round(gpus / capacity, 4),
        "time_to_place_s": round(max(bound_at.values(), default=started) - started, 2),
        "job_wait_p50_s": round(statistics.median(waits), 2) if waits else None,
        "job_wait_p95_s": round(sorted(waits)[int(0.95 * (len(waits) - 1))], 2) if waits else None,
    }


def fgd_fragmented(used: dict[str, float], jobs: list[Request], nodes: int) -> float:
    """FGD's measure (engine/fragmentation.py) of the state a scheduler left: the free GPUs the workload's
    member-size mix is expected not to be able to use, summed over the nodes (whole-GPU members here)."""
    mix = normalised_mix(size_mix_of(jobs))
    free = [GPUS_PER_NODE - int(gpus) for gpus in used.values()] + [GPUS_PER_NODE] * (nodes - len(used))
    milli = sum(expected_fragment_milli([1000] * gpus + [0] * (GPUS_PER_NODE - gpus), mix) for gpus in free)
    return round(milli / 1000, 1)


# ------------------------------------------------------------------------------------------- the engine


def run_engine(policy: str, nodes: int, jobs: list[Request], capacity: int) -> dict:
    state = ClusterState([Node(name=f"vs{i:04d}", gpu_total=GPUS_PER_NODE, gpu_model="H100", nvlink_domain=f"vs{i}",
                               leaf_switch=f"leaf{i // 16}", spine="spine0") for i in range(nodes)])
    placed, gangs, gpus = 0, 0, 0
    used: dict[str, float] = {}
    started, started_cpu = time.perf_counter(), time.process_time()
    for request in jobs:
        decision = state.place(request, policy)
        if isinstance(decision, Placement):
            state.commit(decision, request)
            placed, gangs, gpus = placed + 1, gangs + (request.members > 1), gpus + int(request.gpus)
            for member in decision.assignments:
                used[member.node] = used.get(member.node, 0.0) + request.gpus_per_member
    return {"scheduler": f"portal-{policy}", "jobs_placed": placed, "gangs_placed": gangs, "gangs_in_part": 0,
            "gpus_held_by_part_gangs": 0, "gpus_in_use": gpus, "utilisation": round(gpus / capacity, 4),
            "time_to_place_s": round(time.perf_counter() - started, 3),
            "cpu_s": round(time.process_time() - started_cpu, 3),
            "fragmented_gpus_fgd": fgd_fragmented(used, jobs, nodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=1.1, help="GPUs asked / the cluster's GPUs")
    args = parser.parse_args()
    capacity = args.nodes * GPUS_PER_NODE
    jobs = workload(capacity, args.load, args.seed)
    common = {"nodes": args.nodes, "gpus": capacity, "jobs": len(jobs), "gangs": sum(j.members > 1 for j in jobs),
              "gpus_asked": int(sum(j.gpus for j in jobs)), "seed": args.seed}
    for policy in ("best-fit", "fgd"):
        print(json.dumps({**common, **run_engine(policy, args.nodes, jobs, capacity), "load": load()}), flush=True)
    fixture = Fixture(args.nodes)
    try:
        for name, kueue in (("kube-scheduler", False), ("kueue", True)):
            print(json.dumps({**common, **run_cluster(fixture, name, jobs, capacity, kueue), "load": load()}),
                  flush=True)
    finally:
        fixture.admin.close()
        fixture.stop()


if __name__ == "__main__":
    main()
