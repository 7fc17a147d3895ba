"""Start, seed and stop the project's live fixtures for the live-round benchmark (benchmarks/collect.py).

Each fixture gets its own state dir and free loopback ports (Ray its own address range), so a
developer's fixtures or another engineer's test run on this shared machine are never touched.
Each ``start_*`` returns ``(env, stop)`` or raises ``Unavailable`` with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"


class Unavailable(RuntimeError):
    """The fixture cannot run on this machine (not installed, not root)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(script: Path, env: dict[str, str], timeout: float) -> dict[str, str]:
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise Unavailable(f"{script.relative_to(REPO)} failed: {done.stderr.strip()[-500:]}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def _stopper(script: Path, env: dict[str, str], state: str):
    def stop() -> None:
        subprocess.run(["bash", str(script)], env=env, capture_output=True, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)

    return stop


K8S_PORTS = ("K8S_ETCD_PORT", "K8S_ETCD_PEER_PORT", "K8S_API_PORT", "K8S_SCHEDULER_PORT", "K8S_CONTROLLER_MANAGER_PORT")


def _started(scripts: Path, env: dict[str, str], state: str, timeout: float):
    """``scripts``/start.sh run in ``env``: its KEY=VALUE lines and the stopper (run at once if it fails)."""
    stop = _stopper(scripts / "stop.sh", env, state)
    try:
        values = _run(scripts / "start.sh", env, timeout)
    except BaseException:
        stop()
        raise
    return values, stop


def start_kubernetes(ports: dict[str, int] | None = None):
    """kube-apiserver + etcd + kube-scheduler + kube-controller-manager, seeded with the fleet of
    docs/kubernetes-fixture.md; on ``ports`` (names of K8S_PORTS) where given, else free ones."""
    binaries = Path(os.environ.get("K8S_BIN_DIR", "/var/cache/gpuportal-k8s/go-bin"))
    if os.geteuid() != 0 or not (binaries / "kube-apiserver").exists() or not (binaries / "etcd").exists():
        raise Unavailable("needs root and scripts/k8s/install.sh's binaries")
    state = tempfile.mkdtemp(prefix="gpuportal-k8s-bench-")
    env = {
        **os.environ,
        "K8S_STATE_DIR": state,
        **{k: str((ports or {}).get(k) or free_port()) for k in K8S_PORTS},
    }
    stop = _stopper(SCRIPTS / "k8s" / "stop.sh", env, state)
    try:
        values = _run(SCRIPTS / "k8s" / "start.sh", env, 180)
        seeding = [sys.executable, str(SCRIPTS / "k8s" / "seed.py"), values["K8S_ADMIN_KUBECONFIG"]]
        subprocess.run(seeding, check=True, capture_output=True, timeout=180)
    except BaseException:
        stop()
        raise
    return values, stop


def start_slurm(ports: dict[str, int], acct_db: str, nodes: int = 2):
    """Slurm 22.05 with slurmdbd accounting (scripts/slurm/start.sh) on ``ports`` (SLURMCTLD_PORT,
    SLURMDBD_PORT, SLURMRESTD_PORT, SLURMD_PORT_BASE) and its own accounting database ``acct_db``."""
    if os.geteuid() != 0 or not shutil.which("slurmdbd") or not shutil.which("mariadb"):
        raise Unavailable("needs root and scripts/slurm/install.sh (slurmdbd, MariaDB)")
    state = tempfile.mkdtemp(prefix="gpuportal-slurm-bench-")
    env = {
        **os.environ,
        "SLURM_STATE_DIR": state,
        "SLURM_ACCT_DB": acct_db,
        "SLURM_NODES": str(nodes),
        **{k: str(v) for k, v in ports.items()},
    }
    return _started(SCRIPTS / "slurm", env, state, 300)


def start_ray():
    """Head + 2 workers x 8 GPUs, running scripts/ray/workload.py (placed and pending GPU demand)."""
    venv = REPO / "var" / "ray-venv"
    if not (venv / "bin" / "ray").exists():
        raise Unavailable(f"{venv} missing (scripts/ray/install.sh)")
    state = tempfile.mkdtemp(prefix="gpuportal-ray-bench-")
    env = {
        **os.environ,
        "RAY_STATE_DIR": state,
        "RAY_IP_PREFIX": "127.0.14",
        "RAY_GCS_PORT": str(free_port()),
        "RAY_DASHBOARD_PORT": str(free_port()),
        "RAY_AGENT_PORT_BASE": "53465",
        "RAY_WORKER_PORT_BASE": "23000",
    }
    stop = _stopper(SCRIPTS / "ray" / "stop.sh", env, state)
    try:
        values = _run(SCRIPTS / "ray" / "start.sh", env, 900)
        _submit_ray_workload(values["RAY_DASHBOARD_URL"], venv, Path(state) / "ready")
    except BaseException:
        stop()
        raise
    return values, stop


def _submit_ray_workload(url: str, venv: Path, ready: Path) -> None:
    import httpx

    entrypoint = f"{venv / 'bin' / 'python'} {SCRIPTS / 'ray' / 'workload.py'} {ready}"
    body = {"entrypoint": entrypoint, "metadata": {"team": "llm", "owner": "alice"}}
    httpx.post(f"{url}/api/jobs/", json=body, timeout=30).raise_for_status()
    deadline = time.monotonic() + 180
    while not ready.exists():
        if time.monotonic() > deadline:
            raise Unavailable("the Ray workload did not place its work within 180 s")
        time.sleep(0.5)


def start_prometheus(hosts: list[str]):
    """Prometheus scraping our DCGM-format exporter every second, serving 8 GPUs for each of ``hosts``."""
    if not shutil.which("prometheus"):
        raise Unavailable("prometheus is not installed (scripts/prometheus/install.sh)")
    state = tempfile.mkdtemp(prefix="gpuportal-prometheus-bench-")
    config = Path(state) / "fleet.json"
    gpus = [{"util": (i * 37) % 100} for i in range(8)]
    config.write_text(json.dumps({"nodes": [{"hostname": h, "gpus": gpus} for h in hosts]}))
    env = {
        **os.environ,
        "PROM_STATE_DIR": f"{state}/run",
        "PROM_PORT": str(free_port()),
        "EXPORTER_PORT": str(free_port()),
        "EXPORTER_CONFIG": str(config),
        "SCRAPE_INTERVAL": "1s",
    }
    return _started(SCRIPTS / "prometheus", env, state, 60)
