"""Issue 31, "keep the guarantee", on a real Slurm 22.05: recsys (no guarantee) fills both nodes, nlp (8 GPUs
guaranteed) waits; one collect round and one reclaim round later a recsys job is requeued (``scontrol requeue``)
and nlp's job runs on its GPUs, the plan stating its cause. In review mode nothing moves until an admin approves.

Own fleet: 2 nodes x 8 GPUs, ports 27817/27819/27820, slurmd 27901-27902, state dir
/tmp/gpuportal-slurm-reclaim, accounting database reclaim_slurm_acct, accounts nlp and recsys."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.collectors.reclaim_actuators import SlurmRequeue
from scheduling.models import Orchestrator, Queue, ReclaimPlan, Team, Workload
from scheduling.services.collection import scrape
from scheduling.services.reclaim import apply_reclaim_plan, approve_reclaim_plan, reclaim_round
from tests.collectors.conftest import wait_for

from .conftest import started_fleet

pytestmark = pytest.mark.live

PORTS = {
    "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-reclaim",
    "SLURM_ACCT_DB": "reclaim_slurm_acct",
    "SLURM_NODES": "2",
    "SLURM_ACCOUNTS": "nlp recsys",
    "SLURMCTLD_PORT": "27817",
    "SLURMDBD_PORT": "27819",
    "SLURMRESTD_PORT": "27820",
    "SLURMD_PORT_BASE": "27900",
}
SECRET = "GPUPORTAL_SECRET_RECLAIM_LIVE_JWT"


@pytest.fixture(scope="module")
def fleet():
    with started_fleet("22.05", "start.sh", PORTS) as fleet:
        yield fleet


@pytest.fixture
def borrowed(transactional_db, fleet, monkeypatch, django_user_model):
    """recsys holds all 16 GPUs (two 8-GPU jobs), nlp's 8-GPU job pends on Resources; both teams in the
    portal, nlp guaranteed 8; the fleet registered with reclaim in ``mode`` (set by the test)."""
    monkeypatch.setenv(SECRET, fleet.token)
    admin = django_user_model.objects.create_user("ada", is_staff=True, is_superuser=True)
    for slug, guaranteed in (("nlp", 8), ("recsys", 0)):
        team = Team.objects.create(slug=slug, name=slug)
        queue = Queue(team=team, weight=Decimal(50), guaranteed=guaranteed, burst_limit=16)
        queue._history_user, queue._change_reason = admin, "test teams"
        queue.save()
    for job in fleet.squeue():  # the module's fleet is shared by the tests: each starts from an empty queue
        fleet.run("scancel", job)
    wait_for(lambda: not fleet.squeue(), what="the queue to empty")
    lenders = [fleet.sbatch("-A", "recsys", "-J", f"recsys-{i}", "--gres=gpu:8") for i in range(2)]
    wait_for(lambda: all(fleet.squeue().get(j, ("",))[0] == "RUNNING" for j in lenders), what="recsys to run")
    owner = fleet.sbatch("-A", "nlp", "-J", "nlp-train", "--gres=gpu:8")
    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "PENDING", what="nlp's job to pend")

    def register(mode: str) -> Orchestrator:
        options = {"user": fleet.user, "api_version": fleet.api_version, "slurm_conf": fleet.env["SLURM_CONF"],
                   "reclaim": {"mode": mode, "min_runtime_s": 0, "grace_s": 0}}
        hpc = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=fleet.url,
                                          credentials_ref=f"env:{SECRET}", options=options)
        outcome = scrape(hpc.pk)
        assert outcome.run is not None and outcome.run.ok, outcome
        return hpc

    return register, admin, lenders, owner


def test_a_team_below_its_guarantee_starts_after_a_borrowers_job_is_requeued(borrowed, fleet) -> None:
    register, _admin, lenders, owner = borrowed
    hpc = register("auto")
    assert Workload.objects.get(orchestrator=hpc, external_id=owner).state == Workload.State.PENDING

    plan = reclaim_round(hpc.pk)

    assert plan is not None and plan.state == ReclaimPlan.State.APPLIED, plan and (plan.state, plan.error)
    [reclaim] = plan.reclaims
    assert reclaim["owner"] == "nlp" and reclaim["request_id"] == owner
    assert reclaim["cause"].startswith("nlp held 0 of its 8 guaranteed GPUs")
    [victim] = reclaim["victims"]
    assert victim["team"] == "recsys" and victim["workload_id"] in lenders
    assert [(a["verb"], a["changed"]) for a in plan.actions] == [("requeue", True)]
    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "RUNNING", timeout=60, what="nlp's job to start")
    assert fleet.squeue()[victim["workload_id"]][0] == "PENDING"  # requeued, not cancelled
    assert plan.history.filter(history_change_reason__contains="nlp held 0").exists()
    again = SlurmRequeue(dry_run=False, env={"SLURM_CONF": fleet.env["SLURM_CONF"]}).requeue(victim["workload_id"])
    assert not again.changed and "already PENDING" in again.message  # a retried task never requeues twice


def test_in_review_mode_nothing_is_stopped_until_an_admin_approves(borrowed, fleet) -> None:
    register, admin, lenders, owner = borrowed
    hpc = register("review")

    plan = reclaim_round(hpc.pk)

    assert plan is not None and plan.state == ReclaimPlan.State.PENDING
    assert all(fleet.squeue()[job][0] == "RUNNING" for job in lenders)
    assert fleet.squeue()[owner][0] == "PENDING"
    approve_reclaim_plan(plan.pk, by=admin, reason="nlp's guarantee")
    plan = apply_reclaim_plan(plan.pk)
    assert plan.state == ReclaimPlan.State.APPLIED, plan.error
    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "RUNNING", timeout=60, what="nlp's job to start")
    assert plan.history.filter(history_user=admin, history_change_reason="nlp's guarantee").exists()
