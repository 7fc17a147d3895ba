"""Issue 31, "keep the guarantee" natively on Slurm (22.05 and 24.11, slurm.conf ``PreemptType=preempt/qos``,
``PreemptMode=REQUEUE``): the portal's reclaim round in *native* mode only writes the preemption QOSes
(engine/slurm_preemption.py); then recsys (no guarantee) fills both nodes, nlp (8 GPUs guaranteed) submits, and
slurmctld itself requeues a recsys job and starts nlp's. The portal stops nothing.

Own fleets: 2 nodes x 8 GPUs each; 22.05 on ports 25817/25819/25820, slurmd 25901-25902, state dir
/tmp/gpuportal-slurm-native, database native_slurm_acct_2205; 24.11 on 25827/25829/25830, slurmd 26001-26002,
/tmp/gpuportal-slurm-trixie-native, native_slurm_acct_2411. Accounts nlp and recsys."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.models import Orchestrator, Queue, ReclaimPlan, Team, Workload
from scheduling.services.collection import scrape
from scheduling.services.reclaim import reclaim_round
from tests.collectors.conftest import wait_for

from .conftest import started_fleet

pytestmark = pytest.mark.live

COMMON = {"SLURM_NODES": "2", "SLURM_ACCOUNTS": "nlp recsys", "SLURM_PREEMPT_TYPE": "preempt/qos"}
NATIVE_FLEETS = {
    "22.05": ("start.sh", {**COMMON, "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-native",
                           "SLURM_ACCT_DB": "native_slurm_acct_2205", "SLURMCTLD_PORT": "25817",
                           "SLURMDBD_PORT": "25819", "SLURMRESTD_PORT": "25820", "SLURMD_PORT_BASE": "25900"}),
    "24.11": ("start-trixie.sh", {**COMMON, "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-trixie-native",
                                  "SLURM_ACCT_DB": "native_slurm_acct_2411", "SLURMCTLD_PORT": "25827",
                                  "SLURMDBD_PORT": "25829", "SLURMRESTD_PORT": "25830", "SLURMD_PORT_BASE": "26000"}),
}


SECRET = "GPUPORTAL_SECRET_NATIVE_RECLAIM_LIVE_JWT"


@pytest.fixture(scope="module", params=sorted(NATIVE_FLEETS))
def fleet(request):
    with started_fleet(request.param, *NATIVE_FLEETS[request.param]) as fleet:
        yield fleet


@pytest.fixture
def native_hpc(fleet, transactional_db, monkeypatch) -> Orchestrator:
    """nlp (8 guaranteed) and recsys (none) in the portal; the fleet registered with reclaim mode native and an
    empty queue (the module's fleet is shared by its tests)."""
    monkeypatch.setenv("PATH", fleet.env["PATH"])  # this fleet's scontrol (24.11: the Debian root's)
    monkeypatch.setenv(SECRET, fleet.token)
    for job in fleet.squeue():
        fleet.run("scancel", job)
    wait_for(lambda: not fleet.squeue(), what="the queue to empty")
    for slug, guaranteed in (("nlp", 8), ("recsys", 0)):
        Queue.objects.create(team=Team.objects.create(slug=slug, name=slug), weight=Decimal(50),
                             guaranteed=guaranteed, burst_limit=16)
    options = {"user": fleet.user, "api_version": fleet.api_version, "slurm_conf": fleet.env["SLURM_CONF"],
               "governance": {"cluster": "gpuportal", "sacctmgr": fleet.sacctmgr_prefix()[0]},
               "reclaim": {"mode": "native", "min_runtime_s": 1, "grace_s": 0}}
    return Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=fleet.url, credentials_ref=f"env:{SECRET}",
                                       options=options)


def qos_of(fleet, job: str) -> str:
    return fleet.run("squeue", "-h", "-j", job, "-o", "%q").strip()


def test_slurmctld_requeues_a_borrower_for_the_owner_with_the_portal_only_writing_the_qos(
        fleet, native_hpc) -> None:
    hpc = native_hpc
    assert reclaim_round(hpc.pk) is None  # nothing waits yet: the round only writes the QOSes
    [setup] = ReclaimPlan.objects.filter(orchestrator=hpc)
    assert setup.state == ReclaimPlan.State.NATIVE and setup.reclaims == []
    written = [a["request"] for a in setup.actions]
    assert "sacctmgr -i add qos nlp-guaranteed" in written and "sacctmgr -i add qos scavenger" in written
    qos = fleet.run(*fleet.sacctmgr_prefix(), "-n", "-P", "show", "qos",
                    "format=name,preempt,preemptmode,grptres,preemptexempttime")
    assert "nlp-guaranteed|scavenger|cluster|gres/gpu=8|" in qos.splitlines(), qos
    assert "scavenger||requeue||00:00:01" in qos.splitlines(), qos  # the minimum runtime, kept by slurmctld
    assert reclaim_round(hpc.pk) is None and ReclaimPlan.objects.count() == 1  # written once: nothing differs

    lenders = [fleet.sbatch("-A", "recsys", "-J", f"recsys-{i}", "--gres=gpu:8") for i in range(2)]
    wait_for(lambda: all(fleet.squeue().get(j, ("",))[0] == "RUNNING" for j in lenders), what="recsys to run")
    assert {qos_of(fleet, job) for job in lenders} == {"scavenger"}  # a team without a guarantee borrows
    owner = fleet.sbatch("-A", "nlp", "-J", "nlp-train", "--gres=gpu:8")
    assert qos_of(fleet, owner) == "nlp-guaranteed"

    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "RUNNING", timeout=90, what="slurmctld to start nlp's job")
    states = [fleet.squeue().get(job, ("GONE",))[0] for job in lenders]
    assert sorted(states) == ["PENDING", "RUNNING"], states  # one borrower requeued by slurmctld, not cancelled
    assert ReclaimPlan.objects.count() == 1  # the portal stopped nothing: only the QOS setup is recorded


def test_a_borrower_outside_the_borrow_qos_is_requeued_by_the_portal_in_native_mode(fleet, native_hpc) -> None:
    """recsys's jobs were submitted with --qos=normal (as before native reclaim was turned on): slurmctld may not
    preempt them, nlp's job pends; the native round requeues one itself and says why."""
    hpc = native_hpc
    assert reclaim_round(hpc.pk) is None  # the QOSes (already there from the other test, or written now)
    lenders = [fleet.sbatch("-A", "recsys", "--qos=normal", "-J", f"recsys-{i}", "--gres=gpu:8") for i in range(2)]
    wait_for(lambda: all(fleet.squeue().get(j, ("",))[0] == "RUNNING" for j in lenders), what="recsys to run")
    owner = fleet.sbatch("-A", "nlp", "-J", "nlp-train", "--gres=gpu:8")
    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "PENDING", what="nlp's job to pend")
    assert qos_of(fleet, owner) == "nlp-guaranteed"
    assert scrape(hpc.pk).run.ok
    assert Workload.objects.get(orchestrator=hpc, external_id=owner).state == Workload.State.PENDING

    plans: list[ReclaimPlan | None] = []
    # The borrowers' minimum runtime (1 s, whole seconds as Slurm counts) may not have passed at the first round.
    wait_for(lambda: plans.append(reclaim_round(hpc.pk)) or plans[-1] is not None, timeout=30,
             what="a round past the borrowers' minimum runtime")
    plan = plans[-1]

    assert plan.state == ReclaimPlan.State.APPLIED, (plan.state, plan.error)
    assert "cannot be preempted by it and is requeued by the portal" in plan.reason
    [(victim, verb, changed)] = [(a["victim"], a["verb"], a["changed"]) for a in plan.actions if a["victim"]]
    assert victim in lenders and (verb, changed) == ("requeue", True)
    wait_for(lambda: fleet.squeue().get(owner, ("",))[0] == "RUNNING", timeout=60, what="nlp's job to start")
