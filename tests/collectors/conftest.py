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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import require

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A git worktree sits elsewhere than the main checkout: GPUPORTAL_SHARED_SAMPLES points at the set then.
SHARED_SAMPLES = Path(os.environ.get("GPUPORTAL_SHARED_SAMPLES") or REPO.parent / "shared" / "orchestrator-samples")


def load_fixture(kind: str, name: str) -> Any:
    return json.loads((FIXTURES / kind / name).read_text())


def shared_dir(kind: str) -> Path:
    path = SHARED_SAMPLES / kind
    require(path.is_dir(), f"shared samples not found at {path} (GPUPORTAL_SHARED_SAMPLES points a worktree at them)")
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


@dataclass
class SlurmJobs:
    single: str
    gang: str
    too_big: str
    array: str


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
