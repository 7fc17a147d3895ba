"""Real Chromium through the utilisation drill-down, team → user → job, as the lead and as alice, on a
desktop and a phone: the window rides along, breadcrumbs lead back, alice sees no other member by name."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Orchestrator, Team, Workload

pytestmark = pytest.mark.browser


@pytest.fixture
def alices_job(federation):
    """Her newest start (the list's first row: the governed demo gives alice more jobs than a page), an hour after
    she submitted it."""
    now = timezone.now()
    return Workload.objects.create(
        orchestrator=Orchestrator.objects.get(name="slurm-hpc"), team=Team.objects.get(slug="nlp"), user="alice",
        external_id="alice-drill-1", gpus_per_member=8, state=Workload.State.COMPLETED,
        submitted_at=now - timedelta(minutes=62), started_at=now - timedelta(minutes=2),
        finished_at=now - timedelta(minutes=1),
        nodes=[{"node": "gpu020", "gpus": [0, 1, 2, 3, 4, 5, 6, 7]}],
    )  # fmt: skip


def _drill(page, base_url: str, job: Workload, *, others_named: bool) -> None:
    page.goto(f"{base_url}/utilisation/?range=24h")
    page.locator("#by-team").get_by_role("link", name="NLP research", exact=True).click()
    page.wait_for_url(re.compile(r".*/utilisation/teams/nlp/\?range=24h$"))
    users = page.locator("#user-usage")
    assert (users.get_by_role("link", name=re.compile("^nlp-user")).count() > 0) is others_named
    assert ("other users" in users.inner_text()) is not others_named
    users.get_by_role("link", name="alice", exact=True).click()
    page.wait_for_url(re.compile(r".*/utilisation/teams/nlp/users/alice/\?range=24h$"))
    hours = float(page.locator("#user-gpu-hours").inner_text().replace(",", ""))
    assert hours > 0  # her job's minute and the demo's own jobs of hers
    page.locator("#user-jobs").get_by_role("link", name=job.external_id).click()
    page.wait_for_url(re.compile(rf".*/workloads/{job.pk}/\?team=nlp&range=24h$"))
    assert "Waited 1 h from submission to start" in page.locator("#wait").inner_text()
    assert "gpu020" in page.locator("#placement").inner_text()
    crumbs = page.get_by_role("navigation", name="Breadcrumb")
    crumbs.get_by_role("link", name="alice").click()
    page.wait_for_url(re.compile(r".*/utilisation/teams/nlp/users/alice/\?range=24h$"))
    page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="NLP research").click()
    page.wait_for_url(re.compile(r".*/utilisation/teams/nlp/\?range=24h$"))


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize(("who", "others_named"), [("lead", True), ("alice", False)])
def test_team_user_job_and_back(session, alices_job, who, others_named, width):
    person = session(width=width)
    person.log_in(who, who)
    _drill(person.page, person.base_url, alices_job, others_named=others_named)
    assert person.page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways page on a phone
    assert person.errors == []


def test_a_teams_bar_in_the_chart_opens_its_users(session, alices_job):
    lead = session(width=1440)
    lead.log_in("lead", "lead")
    page = lead.go("/utilisation/?range=24h")
    bar = page.locator("#team-hours-chart .bars .point").first
    bar.wait_for()
    box = bar.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    page.wait_for_url(re.compile(r".*/utilisation/teams/[a-z]+/\?range=24h$"))
    assert page.locator("#user-usage").is_visible() and lead.errors == []
