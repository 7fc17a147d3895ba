"""Admission webhook latency: AdmissionReviews at a fixed rate (default 200/s, open loop) over TLS to
gunicorn serving ``POST /admission/v1/mutate`` with a certificate from scripts/k8s/admission-certs.sh,
as the kube-apiserver calls it. Each review is a GPU pod in a team namespace: routed, patched and
recorded (one AdmissionDecision row each), the full path a real admission takes.

Prints one JSON line: sent, answered, p50/p95/p99 ms, errors, the achieved rate, and the server's CPU per
admission. Open loop: a slow answer does not slow the sender, so queueing shows in the tail, as it would
for the API server. Database as benchmarks/api_load.py ($BENCH_DATABASE_URL; SQLite if PostgreSQL is away).
The server runs as deployed (deploy/k8s/admission.yaml): ``gpuportal.settings_admission``, the webhook without
the pages' middleware; ``--settings gpuportal.settings`` measures it inside the full portal instead.
The server's shape is deploy/k8s/admission.yaml's: 2 gthread workers x 4 threads (one worker per core here).
Usage: python benchmarks/admission_latency.py [--rate 200] [--seconds 10] [--workers 2] [--threads 4] [--quick]
       [--worker-class gthread|sync] [--settings gpuportal.settings_admission]
"""

import argparse
import asyncio
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.api_load import _wait_for  # noqa: E402


def wait_for_port(port: int, tries: int = 6) -> None:
    """gunicorn with --preload takes longer than api_load's 10 s to listen on a loaded machine."""
    for attempt in range(tries):
        try:
            return _wait_for(port)
        except RuntimeError:
            if attempt == tries - 1:
                raise
from benchmarks.api_load import cpu_snapshot, database_url, environment, free_port, percentile  # noqa: E402

PATH = "/admission/v1/mutate"
TOKEN = "benchmark-admission-token"  # the webhook answers only the bearer of GPUPORTAL_ADMISSION_TOKEN


def review() -> bytes:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench", "namespace": "bench-team"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "bench-team",
        "operation": "CREATE", "userInfo": {"username": "bench"}, "object": pod}}).encode()


def populate(env: dict[str, str]) -> None:
    """A team with GPU quota and a Kubernetes pool: every review takes the routed, patched path."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from scheduling.models import Node, Orchestrator, Queue, Team

    team, _ = Team.objects.get_or_create(slug="bench-team", defaults={"name": "Bench"})
    Queue.objects.get_or_create(team=team, gpu_model="", defaults={"weight": 100, "guaranteed": 8, "burst_limit": 64})
    pool, _ = Orchestrator.objects.get_or_create(name="bench-k8s", defaults={"kind": "kubernetes",
                                                                             "endpoint": "https://127.0.0.1:6443"})
    # A node carrying the pool label, so the patch pins the pool as on a cluster a rebalance has labelled.
    Node.objects.get_or_create(orchestrator=pool, name="bench-node", defaults={
        "gpu_model": "H100", "gpu_total": 8, "labels": {"gpuportal.io/pool": "bench-k8s"}})


async def send_at_rate(
    base: str, context: ssl.SSLContext, rate: float, seconds: float
) -> tuple[list[float], list[str]]:
    import aiohttp

    latencies: list[float] = []
    errors: list[str] = []

    async def one(session: aiohttp.ClientSession) -> None:
        started = time.perf_counter()
        try:
            async with session.post(PATH, data=review(), headers={"Content-Type": "application/json",
                                                                    "Authorization": f"Bearer {TOKEN}"}) as response:
                answer = await response.json()
                if response.status != 200 or not answer["response"].get("patch"):
                    errors.append(f"{response.status}")
        except (aiohttp.ClientError, TimeoutError, KeyError) as error:
            errors.append(type(error).__name__)
            return
        latencies.append((time.perf_counter() - started) * 1000)

    connector = aiohttp.TCPConnector(ssl=context, limit=64)  # the API server keeps a pool of connections too
    async with aiohttp.ClientSession(base_url=base, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=10)) as session:
        for _ in range(20):  # warm every worker's imports and the TLS sessions first
            await one(session)
        latencies.clear()
        errors.clear()
        tasks = []
        start = time.perf_counter()
        for index in range(int(rate * seconds)):
            delay = start + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(session)))
        await asyncio.gather(*tasks)
    return latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200, help="admissions per second")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (one per core here)")
    parser.add_argument("--threads", type=int, default=4,
                        help="gthread threads per worker: keep-alive, so TLS is negotiated once per connection "
                             "as with the API server (sync workers close after each answer)")
    parser.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"],
                        help="deploy/k8s/admission.yaml runs gthread; sync closes each connection (a TLS handshake "
                             "per admission)")
    parser.add_argument("--quick", action="store_true", help="3 s, for a smoke run")
    parser.add_argument("--settings", default="gpuportal.settings_admission",
                        help="the server's DJANGO_SETTINGS_MODULE (gpuportal.settings: the whole portal's stack)")
    args = parser.parse_args()
    seconds = 3 if args.quick else args.seconds
    load_before = os.getloadavg()[0]  # the machine's, before this benchmark adds its own
    url, vendor = database_url()
    env = environment(url)
    populate(env)
    env = {**env, "DJANGO_SETTINGS_MODULE": args.settings, "GPUPORTAL_ADMISSION_TOKEN": TOKEN}
    certs = Path(tempfile.mkdtemp(prefix="gpuportal-admission-bench-"))
    subprocess.run(["bash", str(ROOT / "scripts/k8s/admission-certs.sh"), str(certs), "127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "gpuportal.wsgi", "-b", f"127.0.0.1:{port}",
         "-w", str(args.workers), "--preload", "--log-level", "warning",
         "--worker-class", args.worker_class, "--threads", str(args.threads),
         "--certfile", str(certs / "tls.crt"), "--keyfile", str(certs / "tls.key")],
        cwd=ROOT, env=env,
    )
    try:
        wait_for_port(port)
        cpu_before = cpu_snapshot(server.pid, url)
        started = time.perf_counter()
        latencies, errors = asyncio.run(send_at_rate(f"https://127.0.0.1:{port}", context, args.rate, seconds))
        elapsed = time.perf_counter() - started
        cpu_after = cpu_snapshot(server.pid, url)
    finally:
        server.terminate()
        server.wait(20)
        shutil.rmtree(certs, ignore_errors=True)
    answered = max(len(latencies), 1)
    print(json.dumps({
        "scenario": "admission_webhook_latency", "database": vendor, "tls": True, "gunicorn_workers": args.workers,
        "worker_class": args.worker_class, "threads": args.threads if args.worker_class == "gthread" else 1,
        "settings": args.settings,
        "target_rate_per_s": args.rate, "achieved_rate_per_s": round(len(latencies) / elapsed, 1),
        "sent": int(args.rate * seconds), "answered": len(latencies), "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
        "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95), "p99_ms": percentile(latencies, 99),
        "server_cpu_ms_per_admission": round(1000 * (cpu_after["server"] - cpu_before["server"]) / answered, 2),
        "database_cpu_ms_per_admission": round(1000 * (cpu_after["database"] - cpu_before["database"]) / answered, 2),
        "load_average_1m_before": round(load_before, 2), "load_average_1m": round(os.getloadavg()[0], 2),
        "nproc": os.cpu_count(),
    }))


if __name__ == "__main__":
    main()
