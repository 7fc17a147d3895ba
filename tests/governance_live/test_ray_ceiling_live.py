"""Issue 31, "Ray for real", on a real Ray cluster (3 nodes x 8 GPUs, scripts/ray/start.sh): with a pool ceiling
of 8 GPUs a Ray job holding 16 is seen by the governance round (read back from the dashboard, not the portal's own
intent): in review mode the round reads the bound as a pending change (not "unchanged") and stops nothing; in auto
mode it stops the borrowed job through the Jobs API, audited with its cause.

Own cluster: addresses 127.0.7.1-3, GCS 6395, dashboard 8285, agents 52565+, workers 23000+, state dir
/tmp/gpuportal-ray-ceiling. Ray from $RAY_VENV (default var/ray-venv, made by scripts/ray/install.sh)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from scheduling.collectors.ray import RayCollector
from scheduling.models import Orchestrator, PoolPolicy, ReclaimPlan
from scheduling.services import enforcement
from tests.collectors.conftest import REPO, wait_for

pytestmark = pytest.mark.live

ENV = {
    "RAY_STATE_DIR": "/tmp/gpuportal-ray-ceiling",
    "RAY_IP_PREFIX": "127.0.7",
    "RAY_GCS_PORT": "6395",
    "RAY_DASHBOARD_PORT": "8285",
    "RAY_AGENT_PORT_BASE": "52565",
    "RAY_WORKER_PORT_BASE": "23000",
}
# A job holding two 8-GPU bundles until it is stopped.
HOLD_16 = (
    "import ray, time; from ray.util.placement_group import placement_group; ray.init(address='auto'); "
    "pg = placement_group([{'GPU': 8, 'CPU': 1}] * 2, strategy='STRICT_SPREAD'); ray.get(pg.ready(), timeout=120); "
    "time.sleep(86400)"
)


@pytest.fixture(scope="module")
def ray_pool():
    venv = Path(os.environ.get("RAY_VENV") or REPO / "var" / "ray-venv")
    if not (venv / "bin" / "ray").exists() and os.environ.get("CI") != "true":
        pytest.skip(f"live Ray unavailable: {venv} missing (run scripts/ray/start.sh once to install it)")
    env = {**os.environ, **ENV, "RAY_VENV": str(venv)}
    done = subprocess.run(["bash", str(REPO / "scripts/ray/start.sh")], env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    if done.returncode != 0:
        pytest.fail(f"scripts/ray/start.sh failed:\n{done.stdout}\n{done.stderr}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    try:
        yield values["RAY_DASHBOARD_URL"], venv
    finally:
        subprocess.run(["bash", str(REPO / "scripts/ray/stop.sh")], env=env, capture_output=True, timeout=120,
                       check=False)


def held_by(url: str) -> dict[str, float]:
    with RayCollector(url) as collector:
        return {job.submission_id: job.gpus for job in collector.job_holdings()}


def test_a_ray_job_over_the_pool_ceiling_is_seen_and_stopped(ray_pool, transactional_db) -> None:
    url, venv = ray_pool
    answer = httpx.post(f"{url}/api/jobs/", timeout=30, json={
        "entrypoint": f"{venv / 'bin' / 'python'} -c \"{HOLD_16}\"", "metadata": {"team": "llm", "user": "alice"}})
    answer.raise_for_status()
    job = answer.json()["submission_id"]
    wait_for(lambda: held_by(url).get(job) == 16.0, timeout=120, what="the Ray job to hold 16 GPUs")
    ray = Orchestrator.objects.create(name="ray", kind="ray", endpoint=url,
                                      options={"governance": {"mode": "review"}, "reclaim": {"min_runtime_s": 0}})
    PoolPolicy.objects.create(orchestrator=ray, name="ceiling 8", weekdays=[1, 2, 3, 4, 5, 6, 7],
                              start_time=dt.time(0, 0), end_time=dt.time(23, 59, 59), ceiling_gpus=8)

    [review] = [o for o in enforcement.reconcile() if o.orchestrator == "ray"]

    assert review.unchanged == 0 and review.pending == ["ray_pool_bounds:ray"], review
    assert held_by(url).get(job) == 16.0  # review: nothing stopped before an admin approves

    ray.options = {**ray.options, "governance": {"mode": "auto"}}
    ray.save()
    [auto] = [o for o in enforcement.reconcile() if o.orchestrator == "ray"]

    assert auto.applied == ["ray_pool_bounds:ray"] and not auto.failed, auto
    status = lambda: httpx.get(f"{url}/api/jobs/{job}", timeout=30).json()["status"]  # noqa: E731
    wait_for(lambda: status() == "STOPPED", timeout=60, what="the job to stop")
    [plan] = ReclaimPlan.objects.filter(orchestrator=ray, mode="ceiling")
    assert plan.cause == "Ray pool ray held 16 GPUs over its 8-GPU ceiling"
    assert [(a["victim"], a["verb"], a["changed"]) for a in plan.actions] == [(job, "stop", True)]
    assert "team llm borrows above its guarantee of 0" in plan.reclaims[0]["victims"][0]["reason"]
