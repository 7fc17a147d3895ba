"""Reclaim plans in Chromium (issue 31, item 3): an admin finds the waiting plan from the governance page and
approves it by clicking (the apply task then records the dry-run requeue); the owner's researcher and lead read it
without a decision form, an outsider sees no plan; at 1440 and 390 px nothing scrolls sideways.

Screenshots of every role at both widths go to ``$GPUPORTAL_SHOTS`` when it is set (docs: walk the page)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling import tasks
from scheduling.models import Membership, Node, Orchestrator, Queue, ReclaimPlan, Team, Workload
from scheduling.services import reclaim
from tests.browser import shot, sideways

pytestmark = pytest.mark.browser

ROLES = {"admin": None, "lead": ("research", "lead"), "alice": ("nlp", "researcher"), "otto": ("vision", "researcher")}


@pytest.fixture
def reclaim_site(transactional_db, monkeypatch):
    """hpc (2 x 8 GPUs, review mode, dry run): recsys (no guarantee) runs two 8-GPU jobs while nlp (8
    guaranteed) has waited 40 minutes for 8; one review round makes the plan. The apply task runs inline."""
    now = timezone.now()
    research = Team.objects.create(slug="research", name="Research")
    teams = {
        "research": research,
        "nlp": Team.objects.create(slug="nlp", name="NLP research", parent=research),
        "vision": Team.objects.create(slug="vision", name="Vision research", parent=research),
        "recsys": Team.objects.create(slug="recsys", name="Recommendation models"),
    }
    for slug, guaranteed in (("nlp", 8), ("vision", 0), ("recsys", 0)):
        Queue.objects.create(team=teams[slug], weight=Decimal(10), guaranteed=guaranteed, burst_limit=16)
    users = get_user_model().objects
    for name, membership in ROLES.items():
        user = users.create_user(name, password=name, is_staff=membership is None, is_superuser=membership is None)
        if membership:
            Membership.objects.create(user=user, team=teams[membership[0]], role=membership[1])
    hpc = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint="https://hpc.example:6820",
        options={"reclaim": {"mode": "review", "dry_run": True, "grace_s": 300, "min_runtime_s": 600}},
    )
    for name in ("gpu-a01", "gpu-a02"):
        Node.objects.create(orchestrator=hpc, name=name, gpu_model="H100", gpu_total=8, gpu_allocated=8)
    for job, node in (("4101", "gpu-a01"), ("4102", "gpu-a02")):
        Workload.objects.create(orchestrator=hpc, external_id=job, team=teams["recsys"], user="rex", gang_size=1,
                                gpus_per_member=8, state=Workload.State.RUNNING,
                                submitted_at=now - timedelta(hours=3),
                                started_at=now - timedelta(hours=2, minutes=int(job) - 4100), nodes=[{"node": node}])
    Workload.objects.create(orchestrator=hpc, external_id="4200", team=teams["nlp"], user="alice", gang_size=1,
                            gpus_per_member=8, state=Workload.State.PENDING, submitted_at=now - timedelta(minutes=40))
    plan = reclaim.reclaim_round(hpc.pk)
    assert plan is not None and plan.state == ReclaimPlan.State.PENDING
    monkeypatch.setattr(tasks.apply_reclaim_plan, "delay", lambda pk: tasks.apply_reclaim_plan(pk))
    return plan


def test_an_admin_finds_the_plan_from_governance_and_approves_it_by_clicking(session, reclaim_site):
    admin = session(width=1440)
    admin.log_in("admin", "admin")
    page = admin.go("/governance/")
    assert "1 waiting" in page.locator("#reclaim").inner_text()
    page.locator("#reclaim").get_by_role("link", name="Reclaim plans →").click()
    page.wait_for_url("**/reclaim/")
    plan = page.locator(f"#plan-{reclaim_site.pk}")
    assert "Stop 4101 of recsys · 8 GPUs" in plan.inner_text()
    shot(page, "admin-1440-pending")
    plan.get_by_role("button", name="Approve and stop these jobs").click()  # no reason: the browser refuses
    assert ReclaimPlan.objects.get(pk=reclaim_site.pk).state == ReclaimPlan.State.PENDING
    plan.get_by_label(f"Reason for plan #{reclaim_site.pk}").fill("nlp's guarantee; recsys agreed")
    plan.get_by_role("button", name="Approve and stop these jobs").click()
    page.wait_for_load_state()
    assert f"Reclaim plan #{reclaim_site.pk} approved, dry run" in page.locator("[role=status]").inner_text()
    assert "No reclaim plan is waiting." in page.locator("#pending").inner_text()
    past = page.locator("#past").inner_text()
    assert "Applied" in past and "requeue 4101 (dry run)" in past and "nlp's guarantee; recsys agreed" in past
    shot(page, "admin-1440-decided")
    applied = ReclaimPlan.objects.get(pk=reclaim_site.pk)
    assert applied.state == ReclaimPlan.State.APPLIED and applied.decided_by.username == "admin"
    assert [(a["request"], a["dry_run"]) for a in applied.actions] == [("scontrol requeue 4101", True)]
    assert admin.errors == []


@pytest.mark.parametrize("width", [1440, 390])
def test_each_role_reads_what_it_may_and_nothing_scrollssideways(session, reclaim_site, width):
    for name in ROLES:
        person = session(width=width)
        if width == 390:
            person.page.set_viewport_size({"width": 390, "height": 844})
        person.log_in(name, name)
        page = person.go("/")
        page.locator("nav[aria-label=Main]").get_by_role("link", name="Reclaim").click()
        page.wait_for_url("**/reclaim/")
        shot(page, f"{name}-{width}")
        assert sideways(page) <= 1, f"{name}: /reclaim/ scrolls sideways by {sideways(page)}px at {width}"
        pending = page.locator("#pending").inner_text()
        buttons = page.get_by_role("button", name="Approve and stop these jobs")
        if name == "otto":
            assert "No reclaim plan is waiting." in pending and "nlp" not in pending
        elif name == "admin":
            assert buttons.is_visible() and buttons.bounding_box()["width"] <= width
        else:
            assert "nlp holds 0 of its 8 guaranteed GPUs on hpc" in pending
            assert "Stop a job of another team" in pending and "recsys" not in pending
            assert buttons.count() == 0
        assert person.errors == []
