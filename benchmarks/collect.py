"""How long and how much memory parsing a large fleet's answers takes.

Synthetic answers are built from our recorded samples (tests/collectors/fixtures) scaled up:
5,000 Kubernetes nodes with 150,000 pods (in 500-item pages, as the collector lists them) and
2,000 Slurm nodes with 50,000 jobs (one document each, as slurmrestd 22.05 answers). The timed part is
what a collection round does after the bytes arrive: JSON decoding plus building the snapshot.
Each case runs in its own process so that peak RSS is its own. Prints one JSON line per case.

    python benchmarks/collect.py            # both cases
    python benchmarks/collect.py --case k8s
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scheduling.collectors import k8s, slurm  # noqa: E402

FIXTURES = REPO / "tests" / "collectors" / "fixtures"
PAGE = 500


def _fixture(kind: str, name: str):
    return json.loads((FIXTURES / kind / name).read_text())


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


# ------------------------------------------------------------------------------------------ Slurm


def slurm_documents(nodes: int, jobs: int, rng: random.Random) -> tuple[bytes, bytes, bytes]:
    node_template = _fixture("slurm", "v0.0.38_nodes.json")["nodes"][0]
    jobs_doc = _fixture("slurm", "v0.0.38_jobs.json")
    running_template, pending_template = jobs_doc["jobs"][0], jobs_doc["jobs"][3]
    names = [f"gpu{i:05d}" for i in range(nodes)]
    node_list = []
    for name in names:
        used = rng.randint(0, 8)
        node = dict(node_template, name=name, hostname=name, state="mixed" if used else "idle")
        node["gres_used"] = f"gpu:h100:{used}(IDX:{'0-' + str(used - 1) if used else 'N/A'})"
        node_list.append(node)
    job_list = []
    for job_id in range(1, jobs + 1):
        running = rng.random() < 0.3
        job = copy.deepcopy(running_template if running else pending_template)
        width = rng.choice((1, 1, 1, 2, 4))
        job.update(job_id=job_id, node_count=width, account=f"team{job_id % 40}", user_name=f"user{job_id % 300}")
        job["tres_per_node"] = f"gres:gpu:{rng.choice((1, 2, 4, 8))}"
        if running:
            first = rng.randrange(nodes - width)
            job["nodes"] = f"gpu[{first:05d}-{first + width - 1:05d}]" if width > 1 else names[first]
            job["gres_detail"] = ["gpu:h100:1(IDX:0)"] * width
        job_list.append(job)
    meta = {"meta": jobs_doc["meta"], "errors": []}
    partitions = _fixture("slurm", "v0.0.38_partitions.json")
    partitions["partitions"][0]["nodes"] = f"gpu[00000-{nodes - 1:05d}]"
    return (
        json.dumps(meta | {"nodes": node_list}).encode(),
        json.dumps(meta | {"jobs": job_list}).encode(),
        json.dumps(partitions).encode(),
    )


def run_slurm(nodes: int = 2000, jobs: int = 50_000) -> dict:
    bodies = slurm_documents(nodes, jobs, random.Random(1))
    started, cpu = time.perf_counter(), time.process_time()
    snapshot = slurm.build_snapshot("bench-slurm", *(json.loads(body) for body in bodies))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "case": "slurm",
        "nodes": len(snapshot.nodes),
        "jobs": jobs,
        "workloads": len(snapshot.workloads),
        "response_mb": round(sum(map(len, bodies)) / 2**20, 1),
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(_peak_rss_mb()),
    }


# ------------------------------------------------------------------------------------- Kubernetes


def k8s_pages(nodes: int, pods: int, rng: random.Random):
    """Node list (one document) and pod pages as bytes, made lazily page by page like a real list."""
    node_template = _fixture("k8s", "nodelist.json")["items"][0]
    pod_items = _fixture("k8s", "podlist.json")["items"]
    running = next(p for p in pod_items if p["spec"].get("nodeName"))
    pending = next(p for p in pod_items if not p["spec"].get("nodeName"))
    node_items = []
    for i in range(nodes):
        node = copy.deepcopy(node_template)
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = f"node{i:05d}"
        node_items.append(node)
    node_page = json.dumps({"kind": "NodeList", "metadata": {}, "items": node_items}).encode()

    def pod_pages():
        for start in range(0, pods, PAGE):
            items = []
            for i in range(start, min(start + PAGE, pods)):
                bound = rng.random() < 0.8
                pod = copy.deepcopy(running if bound else pending)
                pod["metadata"]["name"] = f"pod-{i}"
                pod["metadata"]["namespace"] = f"team{(i // 4) % 40}"
                pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = f"job-{i // 4}"
                if bound:
                    pod["spec"]["nodeName"] = f"node{rng.randrange(nodes):05d}"
                items.append(pod)
            token = "more" if start + PAGE < pods else ""
            yield json.dumps({"kind": "PodList", "metadata": {"continue": token}, "items": items}).encode()

    return node_page, pod_pages()


def run_k8s(nodes: int = 5000, pods: int = 150_000) -> dict:
    node_page, pod_pages = k8s_pages(nodes, pods, random.Random(1))
    elapsed, cpu, response_bytes, slimmed = 0.0, 0.0, len(node_page), []
    for body in pod_pages:  # generating a page is not timed; decoding and slimming it is
        response_bytes += len(body)
        started, cpu_started = time.perf_counter(), time.process_time()
        slimmed.extend(s for pod in json.loads(body)["items"] if (s := k8s.slim_pod(pod)) is not None)
        elapsed, cpu = elapsed + time.perf_counter() - started, cpu + time.process_time() - cpu_started
    started, cpu_started = time.perf_counter(), time.process_time()
    snapshot = k8s.build_snapshot("bench-k8s", nodes=json.loads(node_page)["items"], pods=slimmed)
    elapsed, cpu = elapsed + time.perf_counter() - started, cpu + time.process_time() - cpu_started
    return {
        "case": "k8s",
        "nodes": len(snapshot.nodes),
        "pods": pods,
        "workloads": len(snapshot.workloads),
        "response_mb": round(response_bytes / 2**20, 1),
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(_peak_rss_mb()),
    }


CASES = {"slurm": run_slurm, "k8s": run_k8s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(CASES[args.case]()), flush=True)
        return
    for case in CASES:  # one process per case so each peak RSS is its own
        subprocess.run([sys.executable, __file__, "--case", case], check=True)


if __name__ == "__main__":
    main()
