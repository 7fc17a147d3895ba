"""Act on my jobs (issue 33 item 14) on a real Slurm 22.05: a lead cancels a running job of the team through the
portal (``scancel``): squeue no longer lists it, and the job page says "cancel sent" until the next collection
round reads it back; a pending job held through the portal shows as held in squeue (JobHeldAdmin/User) and in
the portal after the next round, and released it waits on its own reason again.

Own fleet: 2 nodes x 8 GPUs, ports 27837/27839/27840, slurmd 27961-27962, state dir /tmp/gpuportal-slurm-notify,
accounting database notify_slurm_acct, account nlp."""

from __future__ import annotations

import pytest
from django.urls import reverse

from scheduling.models import JobAction, Membership, Orchestrator, Team, Workload
from scheduling.services import job_actions
from scheduling.services.collection import scrape
from tests.collectors.conftest import wait_for

from .conftest import started_fleet

pytestmark = pytest.mark.live

# Own state dir, accounting database and ports (beside the other live fleets).
PORTS = dict(SLURM_STATE_DIR="/tmp/gpuportal-slurm-notify", SLURM_ACCT_DB="notify_slurm_acct", SLURM_NODES="2",
             SLURM_ACCOUNTS="nlp", SLURMCTLD_PORT="27837", SLURMDBD_PORT="27839", SLURMRESTD_PORT="27840",
             SLURMD_PORT_BASE="27960")
SECRET = "GPUPORTAL_SECRET_JOB_ACTIONS_LIVE_JWT"


@pytest.fixture(scope="module")
def fleet():
    with started_fleet("22.05", "start.sh", PORTS) as fleet:
        yield fleet


@pytest.fixture
def hpc(transactional_db, fleet, monkeypatch, django_user_model, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the action task runs here, at once
    import scheduling.tasks  # noqa: F401 - registers act_on_job (a named signature of an unknown task is sent)
    monkeypatch.setenv(SECRET, fleet.token)
    for job in fleet.squeue():
        fleet.run("scancel", job)
    wait_for(lambda: not fleet.squeue(), what="the queue to empty")
    nlp = Team.objects.create(slug="nlp", name="NLP")
    lead = django_user_model.objects.create_user("leo", password="pw")
    Membership.objects.create(user=lead, team=nlp, role=Membership.Role.LEAD)
    options = {"user": fleet.user, "api_version": fleet.api_version, "slurm_conf": fleet.env["SLURM_CONF"]}
    orchestrator = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=fleet.url,
                                               credentials_ref=f"env:{SECRET}", options=options)
    return orchestrator, lead


def _collected(orchestrator: Orchestrator, job: str) -> Workload:
    outcome = scrape(orchestrator.pk)
    assert outcome.run is not None and outcome.run.ok, outcome
    return Workload.objects.get(orchestrator=orchestrator, external_id=job)


def test_a_lead_cancels_a_running_job_and_the_next_round_confirms_it(hpc, fleet, client,
                                                                     django_capture_on_commit_callbacks):
    orchestrator, lead = hpc
    job = fleet.sbatch("-A", "nlp", "-J", "train", "--gres=gpu:2")
    wait_for(lambda: fleet.squeue().get(job, ("",))[0] == "RUNNING", what="the job to run")
    workload = _collected(orchestrator, job)
    client.force_login(lead)
    confirm = client.get(reverse("workload-act", args=[workload.pk, "cancel"])).content.decode()
    assert f"scancel {job}" in confirm  # the confirmation step says what is sent
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("workload-act", args=[workload.pk, "cancel"]), {"reason": "wrong data"})
    assert response.status_code == 302
    action = JobAction.objects.get(workload=workload)
    assert action.state == JobAction.State.SENT and action.command == f"scancel {job}", action.message
    # One squeue read per try: between two reads the job can leave the queue (the read that failed CI once).
    wait_for(lambda: fleet.squeue().get(job, ("GONE",))[0] != "RUNNING", what="the job to go")
    assert "cancel sent" in client.get(reverse("workload-detail", args=[workload.pk])).content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        _collected(orchestrator, job)
    action.refresh_from_db()
    assert action.state == JobAction.State.CONFIRMED and "no longer runs or queues it" in action.message
    assert action.history.filter(history_user=lead, history_change_reason="wrong data").exists()
    page = client.get(reverse("workload-detail", args=[workload.pk])).content.decode()
    assert "cancel confirmed" in page and "cancel sent" not in page


def test_a_held_job_shows_as_held_in_squeue_and_in_the_portal_and_is_released(hpc, fleet):
    orchestrator, lead = hpc
    job = fleet.sbatch("-A", "nlp", "-J", "later", "--gres=gpu:2", "--begin=now+3600")
    wait_for(lambda: fleet.squeue().get(job, ("",))[0] == "PENDING", what="the job to pend")
    workload = _collected(orchestrator, job)
    assert job_actions.verbs_for(workload) == ["cancel", "hold"]

    held = job_actions.request_action(workload.pk, "hold", by=lead, reason="not before the data is ready")
    held.refresh_from_db()
    assert held.state == JobAction.State.SENT, held.message
    state, reason = fleet.squeue()[job]
    assert state == "PENDING" and reason.startswith("JobHeld"), (state, reason)
    workload = _collected(orchestrator, job)
    held.refresh_from_db()
    assert held.state == JobAction.State.CONFIRMED and job_actions.is_held(workload)
    assert job_actions.verbs_for(workload) == ["cancel", "release"]

    released = job_actions.request_action(workload.pk, "release", by=lead, reason="data is ready")
    released.refresh_from_db()
    assert released.state == JobAction.State.SENT, released.message
    assert not fleet.squeue()[job][1].startswith("JobHeld")
    _collected(orchestrator, job)
    released.refresh_from_db()
    assert released.state == JobAction.State.CONFIRMED
