"""Issue 31, "Ray for real" and "keep the guarantee", on a real Ray cluster (3 nodes x 8 GPUs, scripts/ray/start.sh).

The pool ceiling: with a ceiling of 8 GPUs a Ray job holding 16 is seen by the governance round (read back from the
dashboard, not the portal's own intent): in review mode the round reads the bound as a pending change (not
"unchanged") and stops nothing; in auto mode it stops the borrowed job through the Jobs API, audited with its cause.

Per-team reclaim: a borrower's job holds 16 GPUs while a team below its guarantee waits for 2 x 8; a collect round
records each workload's job submission id, the reclaim round plans (review) and then stops the borrower's job
through the same Jobs API lever (auto), and Ray itself places the owner's waiting group.

Own cluster: addresses 127.0.7.1-3, GCS 6395, dashboard 8285, agents 52565+, workers 23000+, state dir
/tmp/gpuportal-ray-ceiling. Ray from $RAY_VENV (default var/ray-venv, made by scripts/ray/install.sh)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from scheduling.collectors.ray import RayCollector
from scheduling.collectors.snapshot import WorkloadState
from scheduling.models import Orchestrator, PoolPolicy, Queue, ReclaimPlan, Team, Workload
from scheduling.services import collection, reclaim
from scheduling.services.enforcement import rounds as enforcement_rounds
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
# The owner's job: a gang of 2 x 8 GPUs on two nodes, waiting while the borrower holds two of the three nodes.
WANTS_16 = (
    "import ray, time; from ray.util.placement_group import placement_group; ray.init(address='auto'); "
    "pg = placement_group([{'GPU': 8, 'CPU': 1}] * 2, strategy='STRICT_SPREAD', name='nlp-gang'); "
    "ray.get(pg.ready(), timeout=86400); time.sleep(86400)"
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


def submit(url: str, venv: Path, script: str, team: str) -> str:
    answer = httpx.post(f"{url}/api/jobs/", timeout=30, json={
        "entrypoint": f"{venv / 'bin' / 'python'} -c \"{script}\"", "metadata": {"team": team, "user": "alice"}})
    answer.raise_for_status()
    return str(answer.json()["submission_id"])


def job_status(url: str, job: str) -> str:
    return str(httpx.get(f"{url}/api/jobs/{job}", timeout=30).json()["status"])


def stop_all(url: str) -> None:
    """Leave the cluster empty for the next test (the module shares one cluster)."""
    for job in httpx.get(f"{url}/api/jobs/", timeout=30).json():
        if job.get("submission_id") and job.get("status") in ("PENDING", "RUNNING"):
            httpx.post(f"{url}/api/jobs/{job['submission_id']}/stop", timeout=30)
    wait_for(lambda: sum(held_by(url).values()) == 0, timeout=120, what="every Ray job to end")


def held_by(url: str) -> dict[str, float]:
    with RayCollector(url) as collector:
        return {job.submission_id: job.gpus for job in collector.job_holdings()}


def test_a_ray_job_over_the_pool_ceiling_is_seen_and_stopped(ray_pool, transactional_db) -> None:
    url, venv = ray_pool
    stop_all(url)
    job = submit(url, venv, HOLD_16, "llm")
    wait_for(lambda: held_by(url).get(job) == 16.0, timeout=120, what="the Ray job to hold 16 GPUs")
    ray = Orchestrator.objects.create(name="ray", kind="ray", endpoint=url,
                                      options={"governance": {"mode": "review"}, "reclaim": {"min_runtime_s": 0}})
    PoolPolicy.objects.create(orchestrator=ray, name="ceiling 8", weekdays=[1, 2, 3, 4, 5, 6, 7],
                              start_time=dt.time(0, 0), end_time=dt.time(23, 59, 59), ceiling_gpus=8)

    [review] = [o for o in enforcement_rounds.reconcile() if o.orchestrator == "ray"]

    assert review.unchanged == 0 and review.pending == ["ray_pool_bounds:ray"], review
    assert held_by(url).get(job) == 16.0  # review: nothing stopped before an admin approves

    ray.options = {**ray.options, "governance": {"mode": "auto"}}
    ray.save()
    [auto] = [o for o in enforcement_rounds.reconcile() if o.orchestrator == "ray"]

    assert auto.applied == ["ray_pool_bounds:ray"] and not auto.failed, auto
    wait_for(lambda: job_status(url, job) == "STOPPED", timeout=60, what="the job to stop")
    [plan] = ReclaimPlan.objects.filter(orchestrator=ray, mode="ceiling")
    assert plan.cause == "Ray pool ray held 16 GPUs over its 8-GPU ceiling"
    assert [(a["victim"], a["verb"], a["changed"]) for a in plan.actions] == [(job, "stop", True)]
    assert "team llm borrows above its guarantee of 0" in plan.reclaims[0]["victims"][0]["reason"]


def owner_gang_state(url: str) -> str:
    with RayCollector(url) as collector:
        groups = [w for w in collector.collect().workloads if w.name == "nlp-gang"]
    return groups[0].state.value if groups else ""


def test_a_borrowers_ray_job_is_stopped_for_a_team_below_its_guarantee(ray_pool, transactional_db) -> None:
    """recsys (no guarantee) holds 16 of 24 GPUs; nlp (16 guaranteed on this pool) waits for 2 x 8. Review mode plans
    the stop and stops nothing; auto mode stops recsys's job through the Jobs API in that round, and Ray places nlp's
    gang. The grace (3 s) is waited once: the owner must have waited it before any plan."""
    url, venv = ray_pool
    stop_all(url)
    recsys = Team.objects.create(slug="recsys", name="Recsys")
    Queue.objects.create(team=recsys, weight=Decimal(10), guaranteed=0, burst_limit=24)
    nlp = Team.objects.create(slug="nlp", name="NLP")
    Queue.objects.create(team=nlp, weight=Decimal(100), guaranteed=16, burst_limit=16)
    ray = Orchestrator.objects.create(name="ray", kind="ray", endpoint=url, options={
        "reclaim": {"mode": "review", "grace_s": 3, "min_runtime_s": 0}})
    borrower = submit(url, venv, HOLD_16, "recsys")
    wait_for(lambda: held_by(url).get(borrower) == 16.0, timeout=120, what="recsys's job to hold 16 GPUs")
    owner = submit(url, venv, WANTS_16, "nlp")
    wait_for(lambda: owner_gang_state(url) == "pending", timeout=120, what="nlp's gang to wait")

    assert collection.scrape(ray.pk).run.ok
    rows = Workload.objects.filter(orchestrator=ray, state__in=Workload.ACTIVE_STATES)
    assert {(w.team.slug, w.state, w.submission_id) for w in rows} == {
        ("recsys", Workload.State.RUNNING, borrower), ("nlp", Workload.State.PENDING, owner)}
    wait_for(lambda: reclaim.reclaim_round(ray.pk) is not None, timeout=30, what="the grace to pass")
    [plan] = ReclaimPlan.objects.filter(orchestrator=ray, state=ReclaimPlan.State.PENDING)
    assert [v["gang_id"] for v in plan.reclaims[0]["victims"]] == [borrower]
    assert plan.reclaims[0]["cause"].startswith("nlp held 0 of its 16 guaranteed GPUs")
    assert job_status(url, borrower) == "RUNNING"  # review: nothing stopped before an admin approves

    ray.options = {"reclaim": {**ray.options["reclaim"], "mode": "auto"}}
    ray.save()
    assert collection.scrape(ray.pk).run.ok
    applied = reclaim.reclaim_round(ray.pk)

    assert applied is not None and applied.state == ReclaimPlan.State.APPLIED, applied and applied.error
    assert [(a["victim"], a["verb"], a["changed"]) for a in applied.actions] == [(borrower, "stop", True)]
    wait_for(lambda: job_status(url, borrower) == "STOPPED", timeout=60, what="recsys's job to stop")
    wait_for(lambda: owner_gang_state(url) == WorkloadState.RUNNING.value, timeout=120,
             what="Ray to place nlp's gang")
    assert job_status(url, owner) == "RUNNING"
    assert reclaim.apply_reclaim_plan(applied.pk).actions == applied.actions  # applied once: a no-op after
    stop_all(url)
