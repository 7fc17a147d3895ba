"""slurmdb's job window on Slurm 24.11, against the real slurmrestd of scripts/slurm/start-trixie.sh: its data
parsers v0.0.40 and v0.0.41 refuse epoch seconds in ``start_time``/``end_time`` with 422 ("Parsing of <epoch> for
timestamp failed"), v0.0.42 takes them; ``read_finished_jobs_rest`` must find the same finished job on all three.

Own ports (31527-31607, below Linux's ephemeral range 32768-60999 as every fleet's: there an outgoing
connection can hold a daemon's port; a full run errored starting it at 33027) and accounting database."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from scheduling.collectors.httpjson import JsonClient
from scheduling.collectors.slurm_accounting import read_finished_jobs_rest
from tests.collectors.conftest import wait_for
from tests.governance_live.conftest import started_fleet

pytestmark = [pytest.mark.live]

PORTS = {
    "SLURM_STATE_DIR": "/tmp/gpuportal-slurm-trixie-slurmdb-times",
    "SLURM_ACCT_DB": "slurmdb_times_acct_2411",
    "SLURMCTLD_PORT": "31527",
    "SLURMDBD_PORT": "31529",
    "SLURMRESTD_PORT": "31530",
    "SLURMD_PORT_BASE": "31600",
}


@pytest.fixture(scope="module")
def fleet():
    # A fresh accounting database: job ids start at 1 again with the fixture's empty slurmctld state.
    subprocess.run(
        ["mariadb", "-h", "127.0.0.1", "-u", "root", "-e", f"DROP DATABASE IF EXISTS {PORTS['SLURM_ACCT_DB']}"],
        check=True,
        timeout=30,
    )
    with started_fleet("24.11", "start-trixie.sh", PORTS) as started:
        yield started


def _client(fleet) -> JsonClient:
    headers = {"X-SLURM-USER-NAME": fleet.user, "X-SLURM-USER-TOKEN": fleet.token}
    return JsonClient(fleet.url, name="slurm-24.11", headers=headers)


def _finished(fleet, job_id: str) -> bool:
    out = fleet.run("sacct", "-n", "-P", "-X", "-j", job_id, "--format=State")
    return out.strip().startswith(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))


@pytest.mark.parametrize("api_version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_finished_jobs_are_read_through_every_slurmdb_version_of_24_11(fleet, api_version):
    if not hasattr(fleet, "job_id"):
        fleet.job_id = fleet.run(
            "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--gres=gpu:1", "--wrap", "sleep 1"
        ).strip()
        wait_for(lambda: _finished(fleet, fleet.job_id), timeout=120, what="the job to finish in slurmdbd")
    now = time.time()
    jobs = read_finished_jobs_rest(_client(fleet), api_version, now - 3600, now + 60, now=now)
    assert fleet.job_id in {j.job_id for j in jobs}
    found = next(j for j in jobs if j.job_id == fleet.job_id)
    assert found.gpus == 1 and found.end >= found.start > now - 3600


def test_epoch_times_are_what_v0040_refuses(fleet):
    """The cause, kept visible: should a later 24.11 accept epochs on v0.0.40, this says the workaround can go."""
    now = int(time.time())
    with httpx.Client(base_url=fleet.url, timeout=30) as client:
        answer = client.get(
            "/slurmdb/v0.0.40/jobs",
            params={"start_time": now - 3600, "end_time": now},
            headers={"X-SLURM-USER-NAME": fleet.user, "X-SLURM-USER-TOKEN": fleet.token},
        )
    assert answer.status_code == 422 and "for timestamp failed" in answer.text
