"""Act on my jobs in Chromium (issue 33 item 14): alice holds her pending job through the confirmation step
(reason required) and her job page then says "hold requested"; the team's lead is offered cancel and hold on it,
bob (another researcher of the team) no button and a 403 at the action's address, an outsider a 404; the admin
is offered both. At 1280 and 390 px nothing scrolls sideways. Screenshots go to ``$GPUPORTAL_SHOTS``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling.models import JobAction, Membership, Orchestrator, Team, Workload
from tests.browser import shot, sideways

pytestmark = pytest.mark.browser

ROLES = {"admin": None, "lead": ("research", "lead"), "alice": ("nlp", "researcher"), "bob": ("nlp", "researcher"),
         "otto": ("vision", "researcher")}


@pytest.fixture
def job(transactional_db):
    research = Team.objects.create(slug="research", name="Research")
    teams = {
        "research": research,
        "nlp": Team.objects.create(slug="nlp", name="NLP research", parent=research),
        "vision": Team.objects.create(slug="vision", name="Vision"),
    }
    for name, membership in ROLES.items():
        user = get_user_model().objects.create_user(name, password=name, is_staff=membership is None,
                                                    is_superuser=membership is None)
        if membership:
            Membership.objects.create(user=user, team=teams[membership[0]], role=membership[1])
    hpc = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint="https://hpc.example:6820")
    return Workload.objects.create(
        orchestrator=hpc, external_id="73141", team=teams["nlp"], user="alice", name="llama-finetune",
        state=Workload.State.PENDING, pending_reason="Resources", gpus_per_member=8,
        submitted_at=timezone.now() - timedelta(minutes=20),
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_alice_holds_her_job_after_confirming(session, job, width):
    alice = session(width=width)
    alice.log_in("alice", "alice")
    page = alice.go(f"/workloads/{job.pk}/")
    shot(page, f"job-alice-{width}")
    assert sideways(page) <= 1
    page.get_by_role("link", name="Hold job…").click()
    page.wait_for_url(f"**/workloads/{job.pk}/act/hold/")
    assert "scontrol hold 73141" in page.locator("#confirm").inner_text()
    shot(page, f"job-alice-confirm-hold-{width}")
    assert sideways(page) <= 1
    page.get_by_role("button", name="Hold job 73141").click()  # no reason yet: the browser refuses to send
    assert not JobAction.objects.exists()
    page.get_by_label("Reason").fill("waiting for the new tokenizer")
    page.get_by_role("button", name="Hold job 73141").click()
    page.wait_for_url(f"**/workloads/{job.pk}/")
    actions = page.locator("#actions").inner_text()
    assert "hold requested" in actions and "waiting for the new tokenizer" in actions
    shot(page, f"job-alice-hold-requested-{width}")
    action = JobAction.objects.get()
    assert (action.verb, action.requested_by.username) == ("hold", "alice")
    assert alice.errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_what_each_role_is_offered(session, job, width):
    both = ["Cancel job…", "Hold job…"]
    for name, offered, status in (("lead", both, 200), ("admin", both, 200), ("bob", [], 403), ("otto", None, 404)):
        person = session(width=width)
        person.log_in(name, name)
        response = person.page.goto(f"{person.base_url}/workloads/{job.pk}/")
        if offered is None:
            assert response.status == 404
        else:
            assert response.status == 200
            links = person.page.locator("#actions a.button").all_inner_texts() if offered else []
            assert links == offered
            if not offered:
                assert person.page.locator("#actions").count() == 0
        shot(person.page, f"job-{name}-{width}")
        assert sideways(person.page) <= 1
        answer = person.page.goto(f"{person.base_url}/workloads/{job.pk}/act/cancel/")
        assert answer.status == status
        if status == 200:
            shot(person.page, f"job-{name}-confirm-cancel-{width}")
            assert "scancel 73141" in person.page.locator("#confirm").inner_text()
    assert not JobAction.objects.exists()
