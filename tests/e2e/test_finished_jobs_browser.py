"""Real chromium on the finished-jobs list (issue #33 item 15): a researcher finds her finished job with its
GPU-hours, wait and GPU busy share and downloads the list (the file checked); a lead sees the team's history, a
researcher never a teammate's; a user in no team is told why the list is empty; the page fits a phone."""

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling.models import Orchestrator, Team, Workload, WorkloadUtilisation
from tests.browser import sideways

pytestmark = pytest.mark.browser


@pytest.fixture
def jobs(federation):
    """alice's finished 8-GPU sweep in nlp (20 min wait, 3 h run, DCGM: 60 % busy) and bob's finished inference
    job (unmeasured)."""
    now = timezone.now()
    slurm = Orchestrator.objects.get(name="slurm-hpc")
    started = now - timedelta(hours=4)
    sweep = Workload.objects.create(
        orchestrator=slurm, team=Team.objects.get(slug="nlp"), user="alice", external_id="fin-alice-1",
        name="ablation-sweep", gang_size=2, gpus_per_member=4, state=Workload.State.COMPLETED,
        submitted_at=started - timedelta(minutes=20), started_at=started, finished_at=started + timedelta(hours=3),
    )
    WorkloadUtilisation.objects.create(workload=sweep, allocated_gpu_s=8 * 3 * 3600, busy_gpu_s=0.6 * 8 * 3 * 3600,
                                       idle_allocated_gpu_s=2 * 3600, samples=360)
    bobs = Workload.objects.create(
        orchestrator=slurm, team=Team.objects.get(slug="inference"), user="bob", external_id="fin-bob-1",
        gpus_per_member=2, state=Workload.State.FAILED, submitted_at=started, started_at=started,
        finished_at=started + timedelta(hours=1),
    )
    return {"alice": sweep, "bob": bobs}


def signed_in(session, username: str, width: int = 1280):
    person = session(width=width)
    person.log_in(username, username)
    return person


def test_alice_finds_her_job_with_its_efficiency_and_downloads_the_list(session, jobs):
    alice = signed_in(session, "alice")
    page = alice.go("/")
    page.get_by_role("link", name="Finished jobs").click()
    page.wait_for_url(alice.base_url + "/workloads/finished/")
    page.get_by_label("Job ID or name").fill("ablation")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/workloads/finished/?*q=ablation*")
    row = page.locator(f"#finished-{jobs['alice'].pk}")
    cells = row.locator("td").all_inner_texts()
    assert cells[:9] == ["slurm-hpc:fin-alice-1", "nlp", "alice", "slurm-hpc", "8", "24.0", "20 min", "60 %", "2.0"]
    assert page.locator("#finished-jobs tbody tr").count() == 1
    assert page.locator("#total-busy").inner_text() == "60 %"
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as CSV").click()
    assert download.value.suggested_filename == "finished-workloads.csv"
    text = open(download.value.path(), encoding="utf-8").read()  # noqa: SIM115 - a throwaway file Playwright owns
    table = list(csv.reader(io.StringIO(text)))
    assert table[0][:8] == ["Job", "Team", "User", "Orchestrator", "GPUs", "GPU-hours", "Wait", "GPU busy"]
    assert [row[:8] for row in table[1:]] == [
        ["slurm-hpc:fin-alice-1", "nlp", "alice", "slurm-hpc", "8", "24.000", "20 min", "60.0"]]
    row.get_by_role("link", name="slurm-hpc:fin-alice-1").click()
    page.wait_for_url(f"**/workloads/{jobs['alice'].pk}/")
    assert alice.errors == []


def test_each_role_sees_the_finished_jobs_access_allows(session, jobs):
    def shown(username):
        person = signed_in(session, username)
        page = person.go("/workloads/finished/?q=fin-")
        found = set(page.locator("#finished-jobs tbody td:first-child").all_inner_texts())
        assert person.errors == []
        return found, page

    assert shown("admin")[0] == {"slurm-hpc:fin-alice-1", "slurm-hpc:fin-bob-1"}
    assert shown("lead")[0] == {"slurm-hpc:fin-alice-1"}  # research's lead: nlp's history, not inference's
    assert shown("bob")[0] == {"slurm-hpc:fin-bob-1"}
    get_user_model().objects.create_user("carol", password="carol")
    found, page = shown("carol")
    assert found == {"No finished jobs match."}
    assert "You are in no team" in page.locator("main").inner_text()


def test_on_a_phone_the_finished_jobs_fit_the_screen(session, jobs):
    alice = signed_in(session, "alice", width=390)
    page = alice.go("/workloads/finished/?q=ablation")  # the demo's own jobs of hers may fill the first page
    assert page.locator(f"#finished-{jobs['alice'].pk}").is_visible()
    assert sideways(page) <= 0
    assert alice.errors == []
