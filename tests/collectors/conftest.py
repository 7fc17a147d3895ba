"""Collector test fixtures: recorded samples and the live Slurm fleet.

Samples come from two places: ``fixtures/`` (our own recorded responses, always present) and the
shared sample set beside the repository (``../shared/orchestrator-samples``), which tests use when it
is there and skip with a reason when it is not: the project never needs it to run.

Live daemons: a test marked ``live`` skips with a clear reason when it cannot run here (not root, or
the packages are missing), unless ``CI=true``: CI installs them first, so there it is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A git worktree sits elsewhere than the main checkout: GPUPORTAL_SHARED_SAMPLES points at the set then.
SHARED_SAMPLES = Path(os.environ.get("GPUPORTAL_SHARED_SAMPLES") or REPO.parent / "shared" / "orchestrator-samples")


def load_fixture(kind: str, name: str) -> Any:
    return json.loads((FIXTURES / kind / name).read_text())


def shared_dir(kind: str) -> Path:
    path = SHARED_SAMPLES / kind
    if not path.is_dir():
        pytest.skip(f"shared samples not found at {path} (optional; fixtures/ covers the core parsers)")
    return path


def load_shared(kind: str, name: str) -> Any:
    return json.loads((shared_dir(kind) / name).read_text())


def require_live(what: str, binaries: list[str]) -> None:
    """Skip (or, with CI=true, fail) when a live daemon cannot be started on this machine."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root")
    missing = [b for b in binaries if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if not problems:
        return
    message = f"live {what} unavailable: {'; '.join(problems)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run the install script first)")
    pytest.skip(message)


# ------------------------------------------------------------------------------------------ Slurm

SLURM_BINARIES = ["slurmctld", "slurmd", "slurmrestd", "munged", "scontrol", "sbatch", "squeue", "sinfo"]
# Ports apart from a developer's own fleet started by scripts/slurm/start.sh with its defaults.
SLURM_TEST_ENV = {
    "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-pytest",
    "SLURMCTLD_PORT": "16917",
    "SLURMDBD_PORT": "16919",
    "SLURMRESTD_PORT": "16920",
    "SLURMD_PORT_BASE": "17100",
}


@dataclass
class SlurmFleet:
    url: str
    token: str
    user: str
    env: dict[str, str]
    start_seconds: float

    def run(self, *args: str) -> str:
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} -> {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(self, *args: str) -> str:
        return self.run(
            "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args, "--wrap", "sleep 3000"
        ).strip()

    def squeue(self) -> dict[str, tuple[str, str]]:
        """job id -> (state, reason) for every job, array tasks one per line."""
        out = self.run("squeue", "-h", "-r", "-o", "%i|%T|%r")
        return {i: (s, r) for i, s, r in (line.split("|") for line in out.splitlines())}


def wait_for(condition, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


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


@dataclass
class SlurmJobs:
    single: str
    gang: str
    too_big: str
    array: str


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


# -------------------------------------------------------------------------------------------- Ray

RAY_VENV = REPO / "var" / "ray-venv"
RAY_TEST_ENV = {
    "RAY_STATE_DIR": "/tmp/gpuportal-ray-pytest",
    "RAY_IP_PREFIX": "127.0.4",
    "RAY_GCS_PORT": "6390",
    "RAY_DASHBOARD_PORT": "8275",
    "RAY_AGENT_PORT_BASE": "52465",
    "RAY_WORKER_PORT_BASE": "22000",
}


@dataclass
class RayCluster:
    url: str
    venv: Path
    env: dict[str, str]
    start_seconds: float

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.venv / "bin" / "ray"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)} -> {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout


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


def _submit_ray_workload(ray_cluster: RayCluster, ready: Path) -> str:
    """Submit scripts/ray/workload.py through the Jobs REST API with team and submitter metadata; wait until it
    has placed everything (it then holds its work until stopped)."""
    import httpx

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
def _ray_jobs() -> list[str]:
    return []


@pytest.fixture
def ray_workload(ray_cluster: RayCluster, _ray_jobs: list[str], tmp_path_factory) -> str:
    """The session's Ray workload, running. tests/ledger/test_live.py imports ``ray_cluster``, which makes it a
    second session fixture there: it restarts Ray on the same ports, and every job is gone. A database test that
    asks for the workload runs before the ledger's (pytest-django orders database tests first), so the other
    Ray tests found an empty cluster. A job that is no longer RUNNING is reported (a warning with Ray's answer)
    and submitted again."""
    import httpx

    if _ray_jobs:
        answer = httpx.get(f"{ray_cluster.url}/api/jobs/{_ray_jobs[-1]}", timeout=30)
        if answer.is_success and answer.json().get("status") == "RUNNING":
            return _ray_jobs[-1]
        warnings.warn(f"Ray workload {_ray_jobs[-1]} no longer running: {answer.status_code} {answer.text[:300]}",
                      stacklevel=1)
    _ray_jobs.append(_submit_ray_workload(ray_cluster, tmp_path_factory.mktemp("ray") / "ready"))
    return _ray_jobs[-1]
