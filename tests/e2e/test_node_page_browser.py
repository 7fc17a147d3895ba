"""Real chromium on a node's page (issue #33 item 17): a heatmap row opens it; it shows the node's owner and the
jobs on it as each reader may see them; an admin's drain is proposed as a rebalance plan, approved on the plan's
page with a reason, and applied by the rebalancer's steps; the page fits a phone."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling.models import Node, Orchestrator, RebalancePlan, Team, Workload
from scheduling.services import rebalance
from tests.browser import sideways

pytestmark = pytest.mark.browser


@pytest.fixture
def busy_node(federation):
    """The first node of the heatmap with alice's 2-GPU job and bob's 4-GPU job on it, and nothing else."""
    node = Node.objects.select_related("orchestrator").order_by("leaf_switch", "nvlink_domain", "name").first()
    Workload.objects.filter(state=Workload.State.RUNNING, nodes__isnull=False).exclude(nodes=[]).update(nodes=[])
    started = timezone.now() - timedelta(hours=1)

    def run(user, team, job, gpus):
        return Workload.objects.create(
            orchestrator=node.orchestrator, team=Team.objects.get(slug=team), user=user, external_id=job,
            gpus_per_member=gpus, state=Workload.State.RUNNING, submitted_at=started, started_at=started,
            duration_estimate_s=3 * 3600, nodes=[{"node": node.name, "gpus": list(range(gpus))}],
        )

    return node, run("alice", "nlp", "node-alice-1", 2), run("bob", "inference", "node-bob-1", 4)


def signed_in(session, username: str, width: int = 1280):
    person = session(width=width)
    person.log_in(username, username)
    return person


def first_heatmap_row_of(page) -> None:
    """Click the heatmap's top row (the chart is drawn by plotly.js: its drag layer takes the click)."""
    plot = page.locator("#heatmap .nsewdrag").first
    plot.wait_for()
    plot.scroll_into_view_if_needed()
    box = plot.bounding_box()
    x, y = box["x"] + 10, box["y"] + 5
    page.mouse.move(x, y)  # plotly.js reports a click on the point its hover found
    page.locator(".hovertext").first.wait_for()
    page.mouse.click(x, y)


def test_an_admin_opens_a_node_from_the_heatmap_and_drains_it_through_a_plan(session, busy_node):
    node = busy_node[0]
    admin = signed_in(session, "admin")
    page = admin.go("/fragmentation/")
    first_heatmap_row_of(page)
    page.wait_for_url(f"**/nodes/{node.name}/")
    assert page.locator("#node-owner").inner_text().startswith(node.orchestrator.name)
    jobs = page.locator("#node-jobs").inner_text()
    assert f"{node.orchestrator.name}:node-alice-1" in jobs and f"{node.orchestrator.name}:node-bob-1" in jobs
    page.get_by_label("Reason (audited)").fill("GPU 3 throws XID 79")
    page.get_by_role("button", name="Propose the drain").click()
    page.wait_for_url(re.compile(r".*/rebalance/\d+/$"))
    plan = RebalancePlan.objects.get()
    assert page.locator("#plan-state").inner_text() == "Proposed"
    assert Node.objects.get(pk=node.pk).state != Node.State.DRAINING  # nothing happens before the approval
    page.get_by_label("Reason (audited)").fill("replace the GPU tonight")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url("**/rebalance/")
    rebalance.apply_step(plan.pk)  # what the apply_plan_step task runs
    page = admin.go(f"/nodes/{node.name}/")
    assert page.locator("#node-state").inner_text() == "Draining"
    assert f"Plan #{plan.pk} (applying): drain on {node.orchestrator.name}" in page.locator("#node-plans").inner_text()
    assert "jobs running finish" in page.locator("#drain").inner_text()
    assert admin.errors == []


def test_a_researcher_sees_her_job_and_only_a_sum_of_the_others_and_cannot_drain(session, busy_node):
    node = busy_node[0]
    alice = signed_in(session, "alice")
    page = alice.go(f"/nodes/{node.name}/")
    rows = page.locator("#node-jobs tbody tr")
    assert rows.count() == 1 and f"{node.orchestrator.name}:node-alice-1" in rows.first.inner_text()
    assert page.locator("#node-hidden").inner_text() == "And 1 job of other teams on 4 GPUs."
    assert page.locator("#drain").count() == 0
    lead = signed_in(session, "lead")  # research's lead: nlp's job is theirs to see, inference's is not
    page = lead.go(f"/nodes/{node.name}/")
    assert page.locator("#node-jobs tbody tr").count() == 1 and page.locator("#node-hidden").is_visible()
    assert alice.errors == lead.errors == []


def test_a_user_in_no_team_is_told_why_they_may_not_see_a_node(session, busy_node):
    node = busy_node[0]
    get_user_model().objects.create_user("carol", password="carol")
    carol = signed_in(session, "carol")
    response = carol.page.goto(f"{carol.base_url}/nodes/{node.name}/")
    assert response.status == 403
    assert "members of a team and to portal admins" in carol.page.locator("main").inner_text()


def test_on_a_phone_the_node_page_fits(session, busy_node):
    node = busy_node[0]
    admin = signed_in(session, "admin", width=390)
    page = admin.go(f"/nodes/{node.name}/")
    assert page.locator("#node-jobs tbody tr").count() == 2
    assert sideways(page) <= 0
    assert admin.errors == []


def test_an_unknown_node_is_a_404(session, busy_node):
    admin = signed_in(session, "admin")
    assert admin.page.goto(f"{admin.base_url}/nodes/no-such-node/").status == 404
    assert Orchestrator.objects.exists()
