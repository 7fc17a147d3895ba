"""The live clusters every test directory shares: one Slurm fleet, one Ray cluster and one Kubernetes
cluster per session.

Registered once, by tests/conftest.py. A test module or a directory's conftest that imported these
functions would register a second session fixture of the same name: it starts the daemons again on the
same fixed ports, which replaces the first fleet or cluster under the tests still using it (a Ray job
submitted earlier in the session was gone). Helpers stay in tests/collectors/conftest.py and
tests/k8s_live/conftest.py, which hold no fixture of these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config as k8s_config

from tests.collectors.conftest import (
    RAY_TEST_ENV,
    RAY_VENV,
    REPO,
    SLURM_BINARIES,
    SLURM_TEST_ENV,
    RayCluster,
    SlurmFleet,
    SlurmJobs,
    require_live,
    wait_for,
)
from tests.k8s_live.conftest import BIN, SCRIPTS, Cluster, require_fixture, rss_mib, seed, session_env


@pytest.fixture(scope="session")
def slurm_fleet() -> Iterator[SlurmFleet]:
    """A real Slurm 22.05 fleet (8 x 8 fake H100) started once per session by scripts/slurm/start.sh."""
    require_live("Slurm", SLURM_BINARIES)
    env = {**os.environ, **SLURM_TEST_ENV}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(REPO / "scripts/slurm/start.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        pytest.fail(f"scripts/slurm/start.sh failed:\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    env["SLURM_CONF"] = values["SLURM_CONF"]
    fleet = SlurmFleet(values["SLURMRESTD_URL"], values["SLURM_JWT"], values["SLURM_USER"], env, elapsed)
    try:
        yield fleet
    finally:
        subprocess.run(
            ["bash", str(REPO / "scripts/slurm/stop.sh")],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )


@pytest.fixture(scope="session")
def slurm_jobs(slurm_fleet: SlurmFleet) -> SlurmJobs:
    """Real jobs: one 3-GPU job, a 2-node x 8-GPU gang, an 8-node gang that cannot fit (pends with
    reason Resources), and a 4-task array of 2-GPU tasks queued behind it."""
    jobs = SlurmJobs(
        single=slurm_fleet.sbatch("-A", "vision", "-J", "single", "--gres=gpu:h100:3"),
        gang=slurm_fleet.sbatch("-A", "llm", "-J", "gang", "-N", "2", "--gres=gpu:8"),
        too_big=slurm_fleet.sbatch("-A", "llm", "-J", "too-big", "-N", "8", "--gres=gpu:8"),
        array=slurm_fleet.sbatch("-A", "hpo", "-J", "sweep", "--array=0-3", "--gres=gpu:2"),
    )

    def settled() -> bool:
        queue = slurm_fleet.squeue()
        return (
            queue.get(jobs.single, ("",))[0] == "RUNNING"
            and queue.get(jobs.gang, ("",))[0] == "RUNNING"
            and queue.get(jobs.too_big) == ("PENDING", "Resources")
        )

    wait_for(settled, what="jobs to start and the big gang to pend on Resources")
    return jobs


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A real Ray cluster (head + 2 workers x 8 GPUs) started once per session by scripts/ray/start.sh.
    Outside CI it needs var/ray-venv (created by a first scripts/ray/start.sh run, ~1.2 GB from PyPI);
    in CI start.sh creates it."""
    if not (RAY_VENV / "bin" / "ray").exists() and os.environ.get("CI") != "true":
        pytest.skip(f"live Ray unavailable: {RAY_VENV} missing (run scripts/ray/start.sh once to install it)")
    env = {**os.environ, **RAY_TEST_ENV}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(REPO / "scripts/ray/start.sh")], env=env, capture_output=True, text=True, timeout=900, check=False
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        pytest.fail(f"scripts/ray/start.sh failed:\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    env["RAY_ADDRESS"] = values["RAY_ADDRESS"]
    try:
        yield RayCluster(values["RAY_DASHBOARD_URL"], Path(values["RAY_VENV"]), env, elapsed)
    finally:
        subprocess.run(
            ["bash", str(REPO / "scripts/ray/stop.sh")], env=env, capture_output=True, timeout=120, check=False
        )


@pytest.fixture(scope="session")
def ray_workload(ray_cluster: RayCluster, tmp_path_factory) -> str:
    """Submit scripts/ray/workload.py through the Jobs REST API with team and submitter metadata; wait until it
    has placed everything (it then holds its work until the session ends)."""
    import httpx

    ready = tmp_path_factory.mktemp("ray") / "ready"
    entrypoint = f"{ray_cluster.venv / 'bin' / 'python'} {REPO / 'scripts/ray/workload.py'} {ready}"
    response = httpx.post(
        f"{ray_cluster.url}/api/jobs/",
        timeout=30,
        json={"entrypoint": entrypoint, "metadata": {"team": "llm", "user": "alice"}},
    )
    response.raise_for_status()
    wait_for(ready.exists, timeout=120, what="the Ray workload to place its work")
    return response.json()["submission_id"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    require_fixture()
    env = {**os.environ, **session_env(), "K8S_BIN_DIR": str(BIN)}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh")], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    start_seconds = time.monotonic() - started
    if done.returncode != 0:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)
        logs = env["K8S_STATE_DIR"] + "/log"  # kept for a look: only a passing session removes its state
        pytest.fail(f"scripts/k8s/start.sh failed (logs in {logs}):\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    state = Path(values["K8S_STATE_DIR"])
    admin = k8s_config.new_client_from_config(config_file=values["K8S_ADMIN_KUBECONFIG"])
    portal = k8s_config.new_client_from_config(config_file=values["K8S_PORTAL_KUBECONFIG"])
    try:
        seeded = seed.seed(admin)
        rss = {
            name: round(rss_mib(state / "run" / f"{name}.pid"), 1)
            for name in ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
        }
        yield Cluster(admin, portal, state, values, start_seconds, seeded.seconds, rss, seeded.bound)
    finally:
        admin.close()
        portal.close()
        subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=60, check=False)
        shutil.rmtree(env["K8S_STATE_DIR"], ignore_errors=True)
