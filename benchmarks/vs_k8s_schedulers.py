"""kube-scheduler, Kueue (quota only and with topology-aware scheduling) and the portal's own placement side by
side, in one run, on one KWOK cluster; and what Kueue's gang path costs per pod.

    .venv/bin/python benchmarks/vs_k8s_schedulers.py [--nodes 32] [--seed 7] [--load 1.1] [--gang-rounds 3]

The live fixture (scripts/k8s/start.sh: kube-apiserver v1.36.3, etcd, kube-scheduler, kube-controller-manager's
job controller, KWOK) on free ports below 32768 and a throwaway state dir, ``--nodes`` KWOK nodes of 8
``nvidia.com/gpu`` in blocks of 16 (``network.topology.kubernetes.io/block`` leaf0, leaf1, ...; one spine), the
same leaf/spine shape as the engine's nodes, and Kueue v0.17.0 (scripts/k8s/kueue.py) with two ClusterQueues whose
nominal quota is the whole cluster: ``bench`` on a flavor without topology, ``bench-tas`` on a flavor whose
``Topology`` is spine > block > ``kubernetes.io/hostname``. The workload: jobs drawn (seeded) from the openb pod
list's whole-GPU pods (openb-default: 1-8 GPUs, one pod) and from Philly's multi-node jobs (gangs: ``members`` >= 2
pods of up to 8 GPUs), until they ask for ``--load`` x the cluster's GPUs. Each job is a ``batch/v1`` Job with
``parallelism = completions = members``.

- **kube-scheduler**: the Jobs without a queue; the job controller makes every pod, kube-scheduler binds them
  one at a time (no gangs: a gang may be bound in part, its bound members holding GPUs while the rest wait);
- **kueue**: the same Jobs in a LocalQueue of ``bench``; Kueue admits a whole Job when the quota holds all of it
  (quota only: it does not look at nodes), then kube-scheduler binds its pods;
- **kueue_tas**: the same Jobs in a LocalQueue of ``bench-tas``, each gang's pod template annotated
  ``kueue.x-k8s.io/podset-preferred-topology: <block label>`` (one block if it fits, else the fewest: what the
  engine does, leaf before spine; single pods get Kueue's implicit, unconstrained TAS). Kueue admits a Job only
  when its topology assignment finds nodes for every pod; the pods wait behind the ``kueue.x-k8s.io/topology``
  scheduling gate until Kueue's ungater gives each its node (a ``kubernetes.io/hostname`` node selector);
- **portal**: the engine's placement (``ClusterState.place`` + ``commit``, best-fit and FGD, gangs all or
  nothing) on the same nodes, in the same order, no cluster involved.

One JSON line per scheduler: jobs and gangs (members > 1) placed whole, gangs placed whole within one block, gangs
bound in part and the GPUs they hold, GPUs in use / the cluster's (utilisation), fragmentation as FGD measures it
(the free GPUs the workload's size mix cannot use, ``fragmented_gpus_fgd``), time to place (first Job created ->
last pod bound) and the median/p95 of each Job's time from creation to its last member bound. Times come from a
watch on the namespace's pods (monotonic clock at each event), not from polling.

Then ``measure: gang_latency`` lines, one per mode and way of submitting: the seed's claim that "gang scheduling
adds 200-800 ms per pod", measured on the gang path that runs here, Kueue's (Volcano is not served by the Go module
proxy). The same Philly gangs, asking for half the cluster so all fit at once (equal load, no waiting for
capacity), on the empty cluster under each mode, ``--gang-rounds`` times in rotated order, submitted together and
one by one (each Job once the previous one's pods are bound). Per pod: its Job's creation -> the pod bound,
p50/p95; the pod's own creation -> bound; per gang: creation -> last member bound;
``overhead_vs_kube_scheduler_ms`` = the median per pod minus kube-scheduler's. Figures, never assertions; the
machine is shared (load in each line).
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client as k8s  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from kubernetes import watch as k8s_watch  # noqa: E402
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
NODES_PER_BLOCK = 16
BLOCK, SPINE, HOSTNAME = ("network.topology.kubernetes.io/block", "network.topology.kubernetes.io/spine",
                          "kubernetes.io/hostname")
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


def load_script(stem: str):
    """A fixture script of scripts/k8s (seed.py, kueue.py) as a module."""
    spec = importlib.util.spec_from_file_location(f"gpuportal_k8s_{stem}", SCRIPTS / f"{stem}.py")
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


def job_body(request: Request, queue: str | None, tas: bool = False) -> dict:
    """A Job of ``members`` pods; through Kueue if ``queue``; a gang under TAS prefers one block, as the
    engine tries one leaf before the spine (``preferred``, not ``required``: a gang larger than a block still
    runs, across the fewest blocks)."""
    resources = {"requests": {GPU: str(request.gpus_per_member)}, "limits": {GPU: str(request.gpus_per_member)}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/train:1", "resources": resources}
    metadata: dict = {"name": request.id}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    template: dict = {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [container]}}
    if tas and request.members > 1:
        template["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": BLOCK}}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        "spec": {"parallelism": request.members, "completions": request.members, "backoffLimit": 0,
                 "template": template},
    }


def block_of(node: str) -> str:
    """The block (leaf switch) of node ``vsNNNN``: 16 nodes a block, as both the KWOK nodes and the engine's."""
    return f"leaf{int(node.removeprefix('vs')) // NODES_PER_BLOCK}"


def gangs_in_one_block(nodes_of_job: dict[str, list[str]], jobs: list[Request]) -> int:
    """Gangs placed whole with every member in one block."""
    return sum(
        1 for request in jobs
        if request.members > 1 and len(nodes_of_job.get(request.id, ())) == request.members
        and len({block_of(node) for node in nodes_of_job[request.id]}) == 1
    )


# ------------------------------------------------------------------------------------------ the cluster


class Fixture:
    """start.sh + KWOK nodes + kueue.py, on free ports below 32768 and a state dir of its own. Two
    ClusterQueues, each with the whole cluster as nominal quota: ``bench`` on a flavor without topology
    (Kueue admits on quota only) and ``bench-tas`` on a flavor whose Topology is spine > block > hostname."""

    def __init__(self, nodes: int) -> None:
        taken: set[int] = set()
        self.state = tempfile.mkdtemp(prefix="gpuportal-k8s-vs-")
        self.env = {**os.environ, "K8S_STATE_DIR": self.state, "K8S_BIN_DIR": str(BIN),
                    **{key: str(free_low_port(taken)) for key in PORT_KEYS}}
        done = self._run(["bash", str(SCRIPTS / "start.sh")], 180)
        values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self.admin = k8s_config.new_client_from_config(config_file=values["K8S_ADMIN_KUBECONFIG"])
        seed = load_script("seed")
        bodies = [seed.node_body(f"vs{i:04d}", block_of(f"vs{i:04d}"), GPUS_PER_NODE, spine="spine0")
                  for i in range(nodes)]
        seed.register_nodes(k8s.CoreV1Api(self.admin), bodies)
        self._run([sys.executable, str(SCRIPTS / "kueue.py"), "start", self.state], 300)
        custom = k8s.CustomObjectsApi(self.admin)
        flavor = {"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
        topology, tas_flavor = load_script("kueue").tas_bodies(
            "bench-topology", "tas-flavor", [SPINE, BLOCK, HOSTNAME], {"nvidia.com/gpu.product": seed.PRODUCT})
        custom.create_cluster_custom_object(*KUEUE, "topologies", topology)
        for body in (flavor, tas_flavor):
            custom.create_cluster_custom_object(*KUEUE, "resourceflavors", body)
        quota = {"name": GPU, "nominalQuota": nodes * GPUS_PER_NODE}
        for queue, flavor_name in (("bench", "default-flavor"), ("bench-tas", "tas-flavor")):
            custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
                "apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": queue},
                "spec": {"namespaceSelector": {}, "resourceGroups": [
                    {"coveredResources": [GPU], "flavors": [{"name": flavor_name, "resources": [quota]}]}]}})

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


# scheduler line name -> (the ClusterQueue its Jobs go to, None for none; TAS annotations on its gangs)
MODES = {"kube-scheduler": (None, False), "kueue": ("bench", False), "kueue_tas": ("bench-tas", True)}


class PodWatch(threading.Thread):
    """Watches one namespace's pods and notes, on the monotonic clock, when each pod is first seen and first
    seen bound (``spec.nodeName`` set), with its Job and node. A watch, not polling: the gang overhead to
    measure is a few hundred milliseconds."""

    def __init__(self, core: k8s.CoreV1Api, namespace: str) -> None:
        super().__init__(daemon=True)
        self.core, self.namespace = core, namespace
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.job_of: dict[str, str] = {}
        self.node_of: dict[str, str] = {}
        self.last_change = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        watch = k8s_watch.Watch()
        while not self.done.is_set():
            try:
                for event in watch.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=2,
                                          resource_version=watch.resource_version):
                    self._note(event["object"], time.monotonic())
                    if self.done.is_set():
                        break
            except ApiException as error:
                if error.status != 410:
                    raise
                watch.resource_version = None  # too old: list again (pods already noted keep their times)

    def _note(self, pod: k8s.V1Pod, now: float) -> None:
        name = pod.metadata.name
        if name not in self.seen:
            self.seen[name] = now
            self.job_of[name] = (pod.metadata.labels or {}).get("job-name", "")
        if pod.spec.node_name and name not in self.bound:
            self.bound[name] = now
            self.node_of[name] = pod.spec.node_name
            self.last_change = now


def run_jobs(fixture: Fixture, namespace: str, mode: str, jobs: list[Request], all_fit: bool,
             one_by_one: bool = False) -> tuple:
    """Submit ``jobs`` in ``mode`` to a new namespace and watch until every pod is bound (``all_fit``) or no
    pod has been bound for IDLE_S; ``one_by_one`` waits for each Job's pods to be bound (at most IDLE_S)
    before it creates the next. Returns (the watch, each Job's creation time, the start)."""
    core, batch = k8s.CoreV1Api(fixture.admin), k8s.BatchV1Api(fixture.admin)
    queue, tas = MODES[mode]
    core.create_namespace({"metadata": {"name": namespace}})
    if queue:
        k8s.CustomObjectsApi(fixture.admin).create_namespaced_custom_object(*KUEUE, namespace, "localqueues", {
            "apiVersion": "/".join(KUEUE), "kind": "LocalQueue", "metadata": {"name": queue},
            "spec": {"clusterQueue": queue}})
    pods = PodWatch(core, namespace)
    pods.start()
    created: dict[str, float] = {}
    started = time.monotonic()
    for request in jobs:
        created[request.id] = time.monotonic()
        batch.create_namespaced_job(namespace, job_body(request, queue, tas))
        while one_by_one and time.monotonic() - created[request.id] < IDLE_S:
            if sum(pods.job_of[pod] == request.id for pod in list(pods.bound)) == request.members:
                break
            time.sleep(0.02)
    members = sum(request.members for request in jobs)
    while time.monotonic() - max(pods.last_change, created[jobs[-1].id]) < IDLE_S:
        if all_fit and len(pods.bound) == members:
            break
        time.sleep(0.05)
    pods.done.set()
    pods.join()
    return pods, created, started


def delete_namespace(fixture: Fixture, namespace: str) -> None:
    core = k8s.CoreV1Api(fixture.admin)
    core.delete_namespace(namespace)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as error:
            if error.status == 404:
                return
        time.sleep(1)


def run_cluster(fixture: Fixture, mode: str, jobs: list[Request], capacity: int) -> dict:
    namespace = f"vs-{mode.replace('_', '-')}"
    pods, created, started = run_jobs(fixture, namespace, mode, jobs, all_fit=False)
    figures = cluster_figures(jobs, pods, created, started, capacity)
    per_member = {request.id: request.gpus_per_member for request in jobs}
    used: dict[str, float] = {}
    for pod, node in pods.node_of.items():
        used[node] = used.get(node, 0.0) + per_member.get(pods.job_of[pod], 0.0)
    figures["fragmented_gpus_fgd"] = fgd_fragmented(used, jobs, capacity // GPUS_PER_NODE)
    if MODES[mode][0]:
        workloads = k8s.CustomObjectsApi(fixture.admin).list_namespaced_custom_object(*KUEUE, namespace, "workloads")
        conditions = [(w.get("status") or {}).get("conditions") or () for w in workloads["items"]]
        figures["kueue_admitted"] = sum(
            any(c["type"] == "Admitted" and c["status"] == "True" for c in found) for found in conditions)
    delete_namespace(fixture, namespace)
    return {"scheduler": mode, **figures}


def nodes_of_jobs(pods: PodWatch) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod, node in pods.node_of.items():
        out.setdefault(pods.job_of[pod], []).append(node)
    return out


def quantile(values: list[float], q: float) -> float | None:
    return round(sorted(values)[int(q * (len(values) - 1))], 3) if values else None


def cluster_figures(jobs: list[Request], pods: PodWatch, created: dict[str, float], started: float,
                    capacity: int) -> dict:
    by_job: dict[str, list[float]] = {}
    for pod, at in pods.bound.items():
        by_job.setdefault(pods.job_of[pod], []).append(at)
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
        "jobs_placed": whole, "gangs_placed": gangs_whole, "gangs_in_one_block":
        gangs_in_one_block(nodes_of_jobs(pods), jobs), "gangs_in_part": partial, "gpus_held_by_part_gangs":
        partial_gpus, "gpus_in_use": gpus, "utilisation": round(gpus / capacity, 4),
        "time_to_place_s": round(max(pods.bound.values(), default=started) - started, 2),
        "job_wait_p50_s": round(statistics.median(waits), 2) if waits else None,
        "job_wait_p95_s": quantile(waits, 0.95),
    }


def gang_latency(fixture: Fixture, gangs: list[Request], rounds: int) -> list[dict]:
    """The gang path's cost per pod: the same gangs, all fitting at once on the empty cluster (equal load),
    under each mode, ``rounds`` times in rotated order, submitted two ways: ``together`` (all Jobs at once:
    Kueue admits the heads of its queue cycle by cycle, so later gangs wait for earlier ones) and ``one by
    one`` (each Job once the previous one's pods are bound: the path's own latency). Per pod: its Job's
    creation -> the pod bound (``pod_bound``), and the pod's own creation -> bound (``pod_created_to_bound``:
    Kueue creates no pod before it admits the Job). ``overhead_vs_kube_scheduler_ms``: the difference of the
    medians per pod, the figure to hold against the seed's "gang scheduling adds 200-800 ms per pod"."""
    lines = []
    for submitted in ("together", "one by one"):
        samples = {mode: {"bound": [], "created": [], "gang": []} for mode in MODES}
        order = list(MODES)
        for round_no in range(rounds):
            for mode in order[round_no % len(order):] + order[:round_no % len(order)]:
                namespace = f"gl-{round_no}-{submitted.replace(' ', '')}-{mode.replace('_', '-')}"
                pods, created, _ = run_jobs(fixture, namespace, mode, gangs, all_fit=True,
                                            one_by_one=submitted == "one by one")
                add_latency_samples(samples[mode], pods, created)
                delete_namespace(fixture, namespace)
        base = statistics.median(samples["kube-scheduler"]["bound"])
        for mode, found in samples.items():
            lines.append({
                "measure": "gang_latency", "submitted": submitted, "scheduler": mode, "rounds": rounds,
                "gangs": len(gangs), "pods": len(found["bound"]) // rounds,
                "pods_expected": sum(g.members for g in gangs),
                "pod_bound_p50_s": quantile(found["bound"], 0.5), "pod_bound_p95_s": quantile(found["bound"], 0.95),
                "pod_created_to_bound_p50_s": quantile(found["created"], 0.5),
                "gang_bound_p50_s": quantile(found["gang"], 0.5), "gang_bound_p95_s": quantile(found["gang"], 0.95),
                "overhead_vs_kube_scheduler_ms": round(1000 * (statistics.median(found["bound"]) - base)),
            })
    return lines


def add_latency_samples(samples: dict[str, list[float]], pods: PodWatch, created: dict[str, float]) -> None:
    last_bound: dict[str, float] = {}
    for pod, at in pods.bound.items():
        samples["bound"].append(at - created[pods.job_of[pod]])
        samples["created"].append(at - pods.seen[pod])
        last_bound[pods.job_of[pod]] = max(at, last_bound.get(pods.job_of[pod], at))
    samples["gang"] += [at - created[job] for job, at in last_bound.items()]


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
                               leaf_switch=block_of(f"vs{i:04d}"), spine="spine0") for i in range(nodes)])
    placed, gangs, gpus = 0, 0, 0
    used: dict[str, float] = {}
    nodes_of_job: dict[str, list[str]] = {}
    started, started_cpu = time.perf_counter(), time.process_time()
    for request in jobs:
        decision = state.place(request, policy)
        if isinstance(decision, Placement):
            state.commit(decision, request)
            placed, gangs, gpus = placed + 1, gangs + (request.members > 1), gpus + int(request.gpus)
            for member in decision.assignments:
                used[member.node] = used.get(member.node, 0.0) + request.gpus_per_member
                nodes_of_job.setdefault(request.id, []).append(member.node)
    return {"scheduler": f"portal-{policy}", "jobs_placed": placed, "gangs_placed": gangs,
            "gangs_in_one_block": gangs_in_one_block(nodes_of_job, jobs), "gangs_in_part": 0,
            "gpus_held_by_part_gangs": 0, "gpus_in_use": gpus, "utilisation": round(gpus / capacity, 4),
            "time_to_place_s": round(time.perf_counter() - started, 3),
            "cpu_s": round(time.process_time() - started_cpu, 3),
            "fragmented_gpus_fgd": fgd_fragmented(used, jobs, nodes)}


def probe_gangs(capacity: int, seed: int) -> list[Request]:
    """Philly's multi-node jobs (seeded draw) until they ask for half the cluster: all fit at once."""
    philly = [j.request for j in load_trace("philly").jobs if j.request.members > 1]
    rng, gangs, asked = random.Random(seed), [], 0
    while True:
        source = rng.choice(philly)
        per = min(source.gpus_per_member, GPUS_PER_NODE)
        if asked + source.members * per > capacity // 2:
            return gangs
        gangs.append(Request(f"gang-{len(gangs):04d}", members=source.members, gpus_per_member=per))
        asked += source.members * per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=1.1, help="GPUs asked / the cluster's GPUs")
    parser.add_argument("--gang-rounds", type=int, default=3, help="rounds of the gang latency probe (0: none)")
    args = parser.parse_args()
    capacity = args.nodes * GPUS_PER_NODE
    jobs = workload(capacity, args.load, args.seed)
    common = {"nodes": args.nodes, "gpus": capacity, "jobs": len(jobs), "gangs": sum(j.members > 1 for j in jobs),
              "gpus_asked": int(sum(j.gpus for j in jobs)), "seed": args.seed}
    for policy in ("best-fit", "fgd"):
        print(json.dumps({**common, **run_engine(policy, args.nodes, jobs, capacity), "load": load()}), flush=True)
    fixture = Fixture(args.nodes)
    try:
        for mode in MODES:
            print(json.dumps({**common, **run_cluster(fixture, mode, jobs, capacity), "load": load()}), flush=True)
        if args.gang_rounds:
            gangs = probe_gangs(capacity, args.seed)
            for line in gang_latency(fixture, gangs, args.gang_rounds):
                print(json.dumps({"nodes": args.nodes, "seed": args.seed, **line, "load": load()}), flush=True)
    finally:
        fixture.admin.close()
        fixture.stop()


if __name__ == "__main__":
    main()
