"""Governance on real Slurm 22.05 and 24.11 with slurmdbd: the engine's desired accounts written through
sacctmgr, read back through slurmrestd's slurmdb endpoints, and obeyed by slurmctld (shares in sshare,
caps that make jobs pend with AssocGrpGRES and start once a grant raises them)."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from scheduling.collectors.governance_apply import apply_slurm
from scheduling.collectors.httpjson import JsonClient
from scheduling.collectors.slurm import SlurmCollector, jwt_headers
from scheduling.collectors.slurm_accounting import (
    SlurmAccountingWriter,
    gpu_hours_by_account,
    parse_finished_jobs,
    read_associations_rest,
    read_finished_jobs_rest,
    sacctmgr_runner,
)
from scheduling.engine.governance_state import (
    Action,
    GovernanceInput,
    GovGrant,
    GovOrchestrator,
    GovQueue,
    GovTeam,
    desired_state,
    diff,
)
from scheduling.engine.governance_types import SlurmAccount
from scheduling.engine.types import OrchestratorKind
from tests.collectors.conftest import wait_for

pytestmark = pytest.mark.live

HOUR = 3600.0
TEAMS = (GovTeam("research", None, ("alice",)), GovTeam("production", None, ("bob",)))
# Both members submit as root here (the tests' only cluster user): the identity override at work.
HPC = GovOrchestrator(
    "hpc", OrchestratorKind.SLURM, slurm_root_account="portal", user_overrides={"alice": "root", "bob": "root"}
)


def governance(research_burst: int = 8, grants: tuple[GovGrant, ...] = ()) -> GovernanceInput:
    queues = (GovQueue("research", 40, 4, research_burst), GovQueue("production", 60, 8, 32))
    return GovernanceInput(TEAMS, queues, grants)


def writer_for(fleet) -> SlurmAccountingWriter:
    return SlurmAccountingWriter(sacctmgr_runner(fleet.sacctmgr_prefix(), fleet.env), "gpuportal")


def apply(fleet, data: GovernanceInput, at: float = HOUR):
    """One governance round: desired at ``at``, observed through sacctmgr, apply every change."""
    desired = desired_state(data, [HPC], at)["hpc"]
    writer = writer_for(fleet)
    accounts, users = writer.read()
    results = apply_slurm(diff(desired, [*accounts, *users]).changes, writer)
    assert [r for r in results if r.error] == []
    return desired


def rest(fleet) -> closing[JsonClient]:
    return closing(JsonClient(fleet.url, name="slurmdb", headers=jwt_headers(fleet.user, fleet.token)))


def account_shares(fleet) -> dict[str, float]:
    out = fleet.run("sshare", "-n", "-P", "-A", "research,production", "--format=Account,User,NormShares")
    return {a.strip(): float(n) for a, u, n in (line.split("|") for line in out.splitlines()) if not u}


def test_written_weights_show_in_sshare_as_normalised_shares(governed_fleet):
    apply(governed_fleet, governance())
    assert account_shares(governed_fleet) == {"research": pytest.approx(0.4), "production": pytest.approx(0.6)}


def test_what_was_written_reads_back_through_slurmdb_as_the_desired_state(governed_fleet):
    desired = apply(governed_fleet, governance())
    with rest(governed_fleet) as client:
        accounts, users = read_associations_rest(client, governed_fleet.api_version, "gpuportal")
    result = diff(desired, [*accounts, *users], desired.objects)
    assert {c.action for c in result.changes} == {Action.UNCHANGED} and result.drifts == ()
    assert {"slurm_account:vision", "slurm_user:vision/root"} <= set(result.unmanaged)  # made by start.sh
    assert next(a for a in accounts if a.name == "research") == SlurmAccount(
        "research", "portal", 4000, (("gres/gpu", 8),)
    )


def test_a_hand_edit_with_sacctmgr_is_drift_and_the_next_apply_reverts_it(governed_fleet):
    desired = apply(governed_fleet, governance())
    governed_fleet.run("sacctmgr", "-i", "modify", "account", "where", "name=research", "set", "fairshare=7")
    accounts, users = writer_for(governed_fleet).read()
    (drift,) = diff(desired, [*accounts, *users], desired.objects).drifts
    assert drift.id == "slurm_account:research"
    assert [(f.field, f.before, f.after) for f in drift.fields] == [("fairshare", 4000, 7)]
    apply(governed_fleet, governance())
    assert account_shares(governed_fleet)["research"] == pytest.approx(0.4)


def test_a_team_at_its_cap_pends_with_assoc_grp_gres_until_a_grant_raises_it_and_expiry_lowers_it(governed_fleet):
    fleet = governed_fleet
    apply(fleet, governance(research_burst=8))
    full = fleet.sbatch("-A", "research", "-J", "cap-full", "--gres=gpu:8")
    extra = fleet.sbatch("-A", "research", "-J", "cap-extra", "--gres=gpu:1")
    try:
        wait_for(lambda: fleet.squeue().get(full, ("",))[0] == "RUNNING", what="the 8-GPU job to run")
        wait_for(lambda: fleet.squeue().get(extra) == ("PENDING", "AssocGrpGRES"), what="the 9th GPU to pend")
        grant = GovGrant("research", 8, starts_at=2 * HOUR, ends_at=3 * HOUR)
        apply(fleet, governance(8, (grant,)), at=2 * HOUR)  # the grant's first round
        wait_for(lambda: fleet.squeue().get(extra, ("",))[0] == "RUNNING", timeout=60, what="the grant to start it")
        apply(fleet, governance(8, (grant,)), at=3 * HOUR)  # the round after it expired
        accounts, _ = writer_for(fleet).read()
        assert next(a for a in accounts if a.name == "research").grp_tres == (("gres/gpu", 8),)
    finally:
        fleet.run("scancel", full, extra)


def test_the_collector_reads_this_versions_jobs_and_nodes(governed_fleet):
    fleet = governed_fleet
    apply(fleet, governance())
    job = fleet.sbatch("-A", "production", "-J", "collected", "--gres=gpu:3")
    try:
        wait_for(lambda: fleet.squeue().get(job, ("",))[0] == "RUNNING", what="the job to run")
        with SlurmCollector(fleet.url, fleet.token, fleet.user, api_version=fleet.api_version) as collector:
            snapshot = collector.collect()
        workload = next(w for w in snapshot.workloads if w.external_id == job)
        assert (workload.gpus, workload.team, len(workload.nodes)) == (3, "production", 1)
        assert len(snapshot.nodes) == 8 and sum(n.gpu_total for n in snapshot.nodes) == 64
    finally:
        fleet.run("scancel", job)


def test_finished_jobs_come_from_slurmdb_and_sacct_alike_with_their_gpu_hours(governed_fleet):
    fleet = governed_fleet
    apply(fleet, governance())
    job = fleet.run(
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "--output=/dev/null",
        "-A",
        "production",
        "-J",
        "short",
        "--gres=gpu:2",
        "--wrap",
        "sleep 1",
    ).strip()

    def finished() -> list:
        return [j for j in parse_finished_jobs(json.loads(fleet.run("sacct", "-a", "--json"))) if j.job_id == job]

    wait_for(lambda: bool(finished()), timeout=60, what="the short job to be recorded as finished")
    (from_sacct,) = finished()
    assert (from_sacct.account, from_sacct.gpus, from_sacct.state) == ("production", 2, "COMPLETED")
    with rest(fleet) as client:
        from_rest = read_finished_jobs_rest(client, fleet.api_version, from_sacct.start - 60, from_sacct.end + 60)
    assert from_sacct in from_rest
    window = (from_sacct.start - 60, from_sacct.end + 60)
    assert gpu_hours_by_account([from_sacct], *window) == {"production": from_sacct.gpu_seconds / 3600}
