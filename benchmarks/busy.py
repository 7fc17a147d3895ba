"""Ingesting one hour of 15 s DCGM samples for 8,000 GPUs (1,000 nodes × 8): time and peak memory.

Prometheus answers are synthetic but in its exact JSON form (``/api/v1/query_range`` matrices, chunked
by the collector's point budget), built before the clock starts and served through an httpx transport,
so the timed part is what a round does after the bytes arrive: decoding, attribution (half the
workloads with GPU indices, half per node), and the database writes (samples, rollups, per-job rows).
The database is a throwaway SQLite file under var/bench unless DATABASE_URL points elsewhere.
Prints one JSON line. Target: <= 30 s and <= 1 GB RSS.

    python benchmarks/busy.py [--nodes 1000] [--minutes 60]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STEP, ROUND, GPUS_PER_NODE = 15.0, 30.0, 8


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings_test")
    if "DATABASE_URL" not in os.environ:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='gpuportal-bench-')}/busy.sqlite3"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def util(node: int, gpu: int, step: int) -> str:
    """Deterministic percentages: some GPUs idle, most busy, a slow wave over the hour."""
    if (node + gpu) % 7 == 0:
        return "1"
    return str((node * 13 + gpu * 29 + step) % 100)


class FakePrometheus:
    """Serves query_range/query answers for the synthetic fleet; answers are cached by query string."""

    def __init__(self, nodes: int) -> None:
        self.nodes, self.cache = nodes, {}

    def __call__(self, request):
        import httpx

        key = request.url.query
        if key not in self.cache:
            self.cache[key] = self.answer(request.url.path, {k: v[0] for k, v in parse_qs(key.decode()).items()})
        return httpx.Response(200, content=self.cache[key], headers={"Content-Type": "application/json"})

    def answer(self, path: str, params: dict[str, str]) -> bytes:
        if path.endswith("/query"):
            result = [{"metric": {}, "value": [float(params["time"]), str(self.nodes * GPUS_PER_NODE)]}]
            return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        stamps = [start + i * step for i in range(round((end - start) / step) + 1)]
        parts = []
        for n in range(self.nodes):
            for g in range(GPUS_PER_NODE):
                labels = (
                    f'{{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"node{n:04d}","gpu":"{g}",'
                    f'"UUID":"GPU-{n:04d}-{g}","modelName":"NVIDIA H100 80GB HBM3","job":"dcgm"}}'
                )
                values = ",".join(f'[{t:.3f},"{util(n, g, int(t // step))}"]' for t in stamps)
                parts.append(f'{{"metric":{labels},"values":[{values}]}}')
        return ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}").encode()


def build_fleet(nodes: int, now: datetime, minutes: int) -> None:
    """One Slurm pool, two 4-GPU jobs per node (indices for even nodes), 10 teams, a sample per round."""
    from scheduling.models import Node, Orchestrator, Team, UsageSample, Workload

    slurm = Orchestrator.objects.create(name="slurm-big", kind="slurm", endpoint="https://slurm.example")
    Orchestrator.objects.create(
        name="dcgm", kind="prometheus", endpoint="http://prometheus.bench", options={"step_s": STEP, "lag_s": 0}
    )
    teams = [Team.objects.create(slug=f"team{i}", name=f"Team {i}") for i in range(10)]
    Node.objects.bulk_create(
        Node(orchestrator=slurm, name=f"node{n:04d}", gpu_model="H100", gpu_total=GPUS_PER_NODE)
        for n in range(nodes)
    )
    start = now - timedelta(minutes=minutes)
    Workload.objects.bulk_create(
        Workload(
            orchestrator=slurm,
            external_id=f"{n}-{half}",
            team=teams[(n + half) % len(teams)],
            gang_size=1,
            gpus_per_member=4,
            state=Workload.State.RUNNING,
            submitted_at=start,
            started_at=start,
            nodes=[{"node": f"node{n:04d}", "gpus": list(range(half * 4, half * 4 + 4)) if n % 2 == 0 else []}],
        )
        for n in range(nodes)
        for half in (0, 1)
    )
    rounds = int(minutes * 60 / ROUND)
    samples = []
    for r in range(1, rounds + 1):
        taken = start + timedelta(seconds=r * ROUND)
        samples.append(UsageSample(taken_at=taken, orchestrator=slurm, gpus_total=nodes * 8, interval_s=ROUND))
        samples += [
            UsageSample(taken_at=taken, orchestrator=slurm, team=t, gpus_allocated=nodes * 0.8, interval_s=ROUND)
            for t in teams
        ]
    UsageSample.objects.bulk_create(samples, batch_size=2000)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--minutes", type=int, default=60)
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would swamp the JSON
    setup_django()
    import httpx

    from scheduling.collectors.prometheus import PrometheusCollector
    from scheduling.models import Orchestrator, WorkloadUtilisation
    from scheduling.services import busy

    now = datetime.fromtimestamp(int(time.time() // 3600 * 3600), tz=UTC)
    build_fleet(args.nodes, now, args.minutes)
    source = Orchestrator.objects.get(name="dcgm")
    fake = FakePrometheus(args.nodes)
    collector = PrometheusCollector(source.endpoint, name="dcgm", transport=httpx.MockTransport(fake))
    covered = busy.covered_orchestrators(source)
    plan = busy.plan_window(source, now, covered)
    collector.gpu_window(plan.start, plan.points, plan.step)  # warm the answer cache: not timed
    del collector  # drop the warm-up's arrays; a fresh collector reads the cached bytes

    collector = PrometheusCollector(source.endpoint, name="dcgm", transport=httpx.MockTransport(fake))
    wall, cpu = time.perf_counter(), cpu_seconds()
    plan = busy.plan_window(source, now, covered)
    window = collector.gpu_window(plan.start, plan.points, plan.step)
    fetched = time.perf_counter()
    holdings, workloads = busy.holdings_for(plan, covered)
    nodes = {f"node{n:04d}": covered[0].pk for n in range(args.nodes)}
    result = busy.attribute(window, holdings, busy.idle_threshold(), busy.idle_grace_s(), busy.hostname_resolver(nodes))
    attributed = time.perf_counter()
    outcome = busy.store(plan, result, workloads, nodes, window)
    done = time.perf_counter()
    record = {
        "case": "busy_ingest",
        "gpus": args.nodes * GPUS_PER_NODE,
        "minutes": args.minutes,
        "step_s": STEP,
        "samples": window.samples,
        "requests": window.requests,
        "workloads": len(workloads),
        "usage_samples_filled": outcome.samples_filled,
        "utilisation_rows": WorkloadUtilisation.objects.count(),
        "fetch_decode_s": round(fetched - wall, 2),
        "attribute_s": round(attributed - fetched, 2),
        "store_s": round(done - attributed, 2),
        "wall_s": round(done - wall, 2),
        "cpu_s": round(cpu_seconds() - cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "database": os.environ["DATABASE_URL"].split(":", 1)[0],
        "busy_gpu_h": round(outcome.busy_gpu_s / 3600, 1),
        "idle_allocated_gpu_h": round(sum(u.idle_allocated_gpu_s for u in WorkloadUtilisation.objects.all()) / 3600, 1),
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
