"""The issue's story end to end on a real Slurm 22.05 with accounting: alice's cluster login differs from her
portal username (an identity override says so); governance creates her association under that login and caps
her team with GrpTRES; a job she submits on the cluster beyond the cap pends with AssocGrpGRES; the portal's
collector reads it, maps it to her, and her "My workloads" page in Chromium explains the wait with a link to
request quota.

Own fleet: ports 19017/19019/19020 and slurmd 19101-19108, state dir /tmp/gpuportal-slurm-owners, accounting
database owners_slurm_acct (none of the other live fixtures' ports or state)."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from scheduling.models import IdentityOverride, Membership, Orchestrator, Queue, Team, Workload
from scheduling.selectors.workloads import active_workloads
from scheduling.services.collection import scrape
from scheduling.services.identity import save_identity_override
from tests.collectors.conftest import wait_for

from .conftest import started_fleet

pytestmark = pytest.mark.live

PORTS = {
    "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-owners",
    "SLURM_ACCT_DB": "owners_slurm_acct",
    "SLURMCTLD_PORT": "19017",
    "SLURMDBD_PORT": "19019",
    "SLURMRESTD_PORT": "19020",
    "SLURMD_PORT_BASE": "19100",
}
# An existing Unix account other than root stands for alice's login on the cluster: root submits as it
# (sbatch --uid), slurmd runs the job as it, and slurmctld reports it as the job's user.
CLUSTER_LOGIN = "nobody"
SECRET = "GPUPORTAL_SECRET_OWNERS_LIVE_JWT"


@pytest.fixture(scope="module")
def fleet():
    with started_fleet("22.05", "start.sh", PORTS) as fleet:
        yield fleet


@pytest.fixture
def portal(transactional_db, fleet, monkeypatch, django_user_model):
    """Team research (burst limit 8) with alice; the fleet as an auto-mode orchestrator where alice is
    ``CLUSTER_LOGIN``; one governance round has written the accounts, the cap and her association."""
    monkeypatch.setenv(SECRET, fleet.token)
    admin = django_user_model.objects.create_user("ada", is_staff=True, is_superuser=True)
    alice = django_user_model.objects.create_user("alice", password="alice")
    research = Team.objects.create(slug="research", name="Research")
    Membership.objects.create(user=alice, team=research)
    queue = Queue(team=research, weight=Decimal(100), guaranteed=0, burst_limit=8)
    queue._history_user, queue._change_reason = admin, "research's cap"
    queue.save()
    options = {
        "user": fleet.user,
        "api_version": fleet.api_version,
        "slurm_conf": fleet.env["SLURM_CONF"],
        "governance": {"mode": "auto", "cluster": "gpuportal", "root_account": "portal",
                       "sacctmgr": fleet.sacctmgr_prefix()[0]},
    }
    hpc = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint=fleet.url, credentials_ref=f"env:{SECRET}", options=options
    )
    login = IdentityOverride(user=alice, orchestrator=hpc, kind="slurm_user", name=CLUSTER_LOGIN)
    save_identity_override(login, by=admin, reason="alice's login on the HPC cluster")
    out = StringIO()
    call_command("governance", "--once", "--json", stdout=out)
    report = json.loads(out.getvalue())["hpc"]
    assert report["failed"] == 0 and not report["error"], report
    return hpc, alice


@pytest.fixture
def capped_job(fleet, portal):
    """alice (as her cluster login) fills research's 8 GPUs and submits one more GPU, which pends at the cap;
    one collection round reads both. Yields the pending job's id."""
    hpc, _alice = portal

    def submit(name: str, gpus: int) -> str:
        return fleet.sbatch(f"--uid={CLUSTER_LOGIN}", "-A", "research", "-J", name, f"--gres=gpu:{gpus}")

    full, extra = submit("alice-full", 8), submit("alice-capped", 1)
    try:
        wait_for(lambda: fleet.squeue().get(full, ("",))[0] == "RUNNING", what="the 8-GPU job to run")
        wait_for(lambda: fleet.squeue().get(extra) == ("PENDING", "AssocGrpGRES"), what="the 9th GPU to pend")
        outcome = scrape(hpc.pk)
        assert outcome.run is not None and outcome.run.ok, outcome.run and outcome.run.error
        yield extra
    finally:
        fleet.run("scancel", full, extra)


def test_a_job_submitted_as_a_mapped_cluster_login_is_in_that_users_my_workloads(capped_job, portal):
    _hpc, alice = portal
    mine = {w.external_id: w for w in active_workloads(alice)}
    assert set(mine) >= {capped_job}
    job = mine[capped_job]
    assert (job.user, job.cluster_user, job.state, job.pending_reason) == (
        "alice", CLUSTER_LOGIN, Workload.State.PENDING, "AssocGrpGRES"
    )
    assert job.team.slug == "research"


@pytest.mark.browser
def test_alice_sees_her_capped_slurm_job_explained_with_a_request_quota_link(capped_job, portal, session):
    browser = session()
    browser.log_in("alice", "alice")
    job = Workload.objects.get(external_id=capped_job)
    row = browser.my_workload_row(capped_job, job.pk)
    assert f"hpc:{capped_job}" in row.inner_text() and f"as {CLUSTER_LOGIN}" in row.inner_text()
    explanation = row.locator(".explanation").inner_text()
    assert "your team is at its GPU limit of 8 (burst): 8 in use, this job needs 1 more" in explanation
    assert "Slurm says: AssocGrpGRES" in explanation
    assert browser.request_quota_from(row, "research") == str(job.team_id)
    assert browser.errors == []
