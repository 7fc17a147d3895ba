"""Slurm accounting as the portal's usage source, against real slurmdbd (22.05 and 24.11): jobs far shorter than
a scrape round, read by the collection round's accounting step (``sacct --json``), give the same GPU-seconds
per account as ``sreport cluster AccountUtilizationByUser -T gres/gpu -t Seconds`` for the same hour.

sreport reads slurmdbd's hourly rollup tables, which slurmdbd fills once an hour has passed. The test asks
slurmdbd to roll the hour up now with ``sacctmgr rollup <start> <end>``: the rollup takes its end as given
(truncated to the hour, not clamped to the present; as_mysql_usage.c), so the hour of the jobs is rolled up
by slurmdbd's own code, nothing written by hand.

Fault, 22.05: a governance round while slurmdbd is down records the error and nothing else; the next round,
with slurmdbd back, applies the change.

Own ports (32000-32700, below Linux's ephemeral range), state dirs and accounting databases, so CI's fleets and
the other governance tests run beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from scheduling.collectors.slurm_accounting import SlurmAccountingWriter, sacctmgr_runner
from scheduling.engine.governance_types import SlurmAccount, SlurmUser
from scheduling.models import AppliedObject, Orchestrator, Queue, Team, Workload
from scheduling.selectors.report import held_intervals
from scheduling.services.accounting import sync_accounting
from scheduling.services.orchestrators import accounting_reader
from tests.collectors.conftest import wait_for
from tests.governance_live.conftest import started_fleet

pytestmark = [pytest.mark.live, pytest.mark.django_db]

USAGE_FLEETS = {
    "22.05": (
        "start.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-usage",
            "SLURM_ACCT_DB": "usage_slurm_acct_2205",
            "SLURMCTLD_PORT": "32017",
            "SLURMDBD_PORT": "32019",
            "SLURMRESTD_PORT": "32020",
            "SLURMD_PORT_BASE": "32100",
        },
    ),
    "24.11": (
        "start-trixie.sh",
        {
            "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-trixie-usage",
            "SLURM_ACCT_DB": "usage_slurm_acct_2411",
            "SLURMCTLD_PORT": "32027",
            "SLURMDBD_PORT": "32029",
            "SLURMRESTD_PORT": "32030",
            "SLURMD_PORT_BASE": "32200",
        },
    ),
}
HOUR = 3600
# (account, GPUs, seconds): each far shorter than a 30 s round.
JOBS = (("production", 2, 2), ("research", 1, 3), ("production", 4, 1), ("research", 3, 2))


@pytest.fixture(scope="module", params=sorted(USAGE_FLEETS))
def usage_fleet(request):
    # A fresh accounting database: the fixture's slurmctld starts from empty state, so its job ids start at 1
    # again, and slurmdbd's records of a previous run's jobs 1, 2, ... hide this run's from sacct's time window.
    database = USAGE_FLEETS[request.param][1]["SLURM_ACCT_DB"]
    subprocess.run(
        ["mariadb", "-h", "127.0.0.1", "-u", "root", "-e", f"DROP DATABASE IF EXISTS {database}"],
        check=True,
        timeout=30,
    )
    with started_fleet(request.param, *USAGE_FLEETS[request.param]) as fleet:
        fleet.env["TZ"] = "UTC"  # sacctmgr rollup and sreport read the times given below as UTC
        yield fleet


def accounts_with_root_as_member(fleet) -> None:
    writer = SlurmAccountingWriter(sacctmgr_runner(fleet.sacctmgr_prefix(), fleet.env), "gpuportal")
    for account in ("research", "production"):
        writer.ensure_account(SlurmAccount(account, "root", 1, ()))
        writer.ensure_user(SlurmUser("root", account))


def submit(fleet, account: str, gpus: int, seconds: int) -> str:
    return fleet.run(
        "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "-A", account, f"--gres=gpu:{gpus}",
        "--wrap", f"sleep {seconds}",
    ).strip()  # fmt: skip


def finished_in_sacct(fleet, job_ids: list[str]) -> bool:
    out = fleet.run("sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "--format=JobID,State")
    states = dict(line.split("|")[:2] for line in out.splitlines())
    return all(states.get(j, "").startswith(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")) for j in job_ids)


def utc(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def sreport_gpu_seconds(fleet, start: int, end: int) -> dict[str, int]:
    """Account totals (the lines without a login) of sreport's AccountUtilizationByUser, in GPU-seconds."""
    out = fleet.run(
        "sreport", "-n", "-P", "-T", "gres/gpu", "-t", "Seconds", "cluster", "AccountUtilizationByUser",
        f"start={utc(start)}", f"end={utc(end)}", "format=Accounts,Login,Used",
    )  # fmt: skip
    rows = (line.split("|") for line in out.splitlines() if line.strip())
    return {account: int(used) for account, login, used in rows if not login and account != "root"}


def portal_gpu_seconds(start: int, end: int) -> dict[str, int]:
    slugs = dict(Team.objects.values_list("pk", "slug"))
    totals: dict[str, float] = {}
    for item in held_intervals(datetime.fromtimestamp(start, tz=UTC), datetime.fromtimestamp(end, tz=UTC)):
        slug = slugs[item.team_id]
        totals[slug] = totals.get(slug, 0.0) + item.gpus * (item.end - item.start).total_seconds()
    return {slug: round(seconds) for slug, seconds in totals.items()}


def test_gpu_seconds_per_account_equal_sreport_for_the_same_hours(usage_fleet):
    fleet = usage_fleet
    for slug in ("research", "production"):
        Team.objects.create(slug=slug, name=slug.title())
    accounts_with_root_as_member(fleet)
    orchestrator = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint=fleet.url,
        options={"slurm_conf": fleet.env["SLURM_CONF"], "accounting": {"sacct": f"{fleet.bin_dir}/sacct"}},
    )  # fmt: skip
    job_ids = [submit(fleet, *job) for job in JOBS]
    wait_for(lambda: finished_in_sacct(fleet, job_ids), timeout=120, what="the short jobs to finish in slurmdbd")
    # sacct -j can say COMPLETED a moment before the windowed --json read the portal makes holds the jobs with their
    # end times (seen on a loaded machine: the first read found none); the next round's read, 15 min of overlap,
    # would take them, so wait for that view instead of racing it.
    read = accounting_reader(orchestrator)
    wait_for(
        lambda: set(job_ids) <= {j.job_id for j in read(time.time() - HOUR, time.time() + 1) if j.gpus},
        timeout=60, what="the windowed accounting read to hold the finished jobs",
    )  # fmt: skip

    source = sync_accounting(orchestrator)  # the collection round's accounting step, no scrape in between
    assert source is not None and not source.stale, source and source.last_error
    jobs = Workload.objects.filter(external_id__in=job_ids)
    assert jobs.count() == len(JOBS)
    start = int(min(j.started_at.timestamp() for j in jobs)) // HOUR * HOUR
    end = int(max(j.finished_at.timestamp() for j in jobs)) // HOUR * HOUR + HOUR

    fleet.run("sacctmgr", "-i", "rollup", utc(start), utc(end))
    from_sreport = sreport_gpu_seconds(fleet, start, end)
    assert from_sreport == portal_gpu_seconds(start, end)
    assert from_sreport["production"] > 0 and from_sreport["research"] > 0

    assert sync_accounting(orchestrator).jobs_recorded == 0  # read again: nothing new, nothing counted twice
    assert Workload.objects.filter(external_id__in=job_ids).count() == len(JOBS)


# ------------------------------------------------------------------------------------------------ faults


def stop_slurmdbd(fleet) -> None:
    pid = int(Path(fleet.env["SLURM_STATE_DIR"], "run", "slurmdbd.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=30, what="slurmdbd to stop")


def slurmdbd_answers(fleet) -> bool:
    try:
        fleet.run("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster")
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return True


def governance_round() -> dict:
    out = StringIO()
    call_command("governance", "--once", "--json", stdout=out)
    return json.loads(out.getvalue())


# 22.05 only: restarting slurmdbd inside the 24.11 chroot is not scripted (scripts/slurm/start-trixie.sh).
@pytest.mark.parametrize("usage_fleet", ["22.05"], indirect=True)
def test_a_round_while_slurmdbd_is_down_keeps_the_change_pending_and_applies_it_when_it_is_back(
    usage_fleet, django_user_model
):
    fleet = usage_fleet
    admin = django_user_model.objects.create_user("ada", is_staff=True)
    team = Team.objects.create(slug="vision", name="Vision")
    queue = Queue(team=team, weight=Decimal(30), guaranteed=2, burst_limit=6)
    queue._history_user, queue._change_reason = admin, "vision 30 %"
    queue.save()
    governance = {"mode": "auto", "cluster": "gpuportal", "sacctmgr": fleet.sacctmgr_prefix()[0]}
    orchestrator = Orchestrator.objects.create(
        name="hpc",
        kind="slurm",
        endpoint=fleet.url,
        options={"slurm_conf": fleet.env["SLURM_CONF"], "governance": governance},
    )
    stop_slurmdbd(fleet)
    try:
        down = governance_round()["hpc"]
        assert down["error"] and down["applied"] == 0, down
        assert not AppliedObject.objects.filter(orchestrator=orchestrator).exists()  # nothing half-recorded
    finally:
        subprocess.run(["/usr/sbin/slurmdbd"], env=fleet.env, check=True, timeout=30)
        wait_for(lambda: slurmdbd_answers(fleet), timeout=60, what="slurmdbd to answer again")
    back = governance_round()["hpc"]
    assert back["applied"] > 0 and back["failed"] == 0 and not back["error"], back
    out = fleet.run("sacctmgr", "-n", "-P", "show", "assoc", "account=vision", "format=account,user,grptres")
    assert "vision||gres/gpu=6" in out.splitlines()
    assert AppliedObject.objects.filter(orchestrator=orchestrator, team="vision").exists()
